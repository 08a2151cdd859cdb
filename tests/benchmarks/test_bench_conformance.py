"""benchmarks/bench_conformance.py without building anything: what it reads from a
log, which variant and archs it picks, the table it writes and how it resumes."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

import pytest
from paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_conformance as conformance
from bench_conformance import FAIL, PASS, Outcome

KERNELS = [("relu", 1800), ("rotary", 2000), ("natten", 15_000_000)]


def test_first_error_skips_flags_and_echoed_commands() -> None:
    log = "\n".join(
        [
            "+ cmake --build build -j 2 -Werror=return-type",
            "-- Looking for error_handling.h",
            "[1/3] Building CUDA object kernel.cu.o",
            '/tmp/x/project/kernel/a.cu(12): error: identifier "foo" is undefined',
            "/tmp/x/project/kernel/a.cu(13): error: second",
            "ninja: build stopped: subcommand failed.",
        ]
    )
    assert conformance.first_error(log) == (
        '/tmp/x/project/kernel/a.cu(12): error: identifier "foo" is undefined'
    )
    assert conformance.first_error("all fine\n") == ""


def test_a_failed_check_is_named_by_its_first_violation() -> None:
    log = "\n".join(
        [
            "torch214-cxx11-cu130-x86_64-linux  [policy kernel, import]",
            "  (variant)",
            "    [import] kernels.get_local_kernel: import failed: No module named 'triton'",
            "  a.py",
            "    note [python-import] line 1: numpy: optional dependency",
            "FAIL  torch214-cxx11-cu130-x86_64-linux: 1 violation in 1 file (import 1)",
        ]
    )
    assert conformance.first_error(log) == (
        "[import] kernels.get_local_kernel: import failed: No module named 'triton'"
    )


def test_build_steps_reads_ninjas_last_count() -> None:
    log = "[1/405] Building CUDA object a.cu.o\n[12/405] Building CUDA object b.cu.o\nx\n"
    assert conformance.build_steps(log) == ", 12 of 405 build steps done"
    assert conformance.build_steps("configuring\n") == ""


def test_classify_names_what_this_machine_lacks() -> None:
    error = "nvcc fatal   : Unsupported gpu architecture 'compute_100f'"
    assert conformance.classify("", error)[0] == conformance.MACHINE
    error = "/tmp/x/project/kernel/a.cu(12): error: identifier is undefined"
    assert conformance.classify("", error)[0] == conformance.UNKNOWN


def test_variant_and_archs() -> None:
    names = ["torch213-cxx11-cu130-x86_64-linux", "torch214-cxx11-cu130-x86_64-linux"]
    assert conformance.choose_variant(names) == "torch214-cxx11-cu130-x86_64-linux"
    stable = ["torch-stable-abi29-cu126-x86_64-linux", "torch-stable-abi29-cu130-x86_64-linux"]
    assert conformance.choose_variant(stable) == "torch-stable-abi29-cu130-x86_64-linux"
    assert conformance.choose_variant(["torch214-cxx11-cu126-x86_64-linux"]) is None
    # A kernel pinning C++17 gets the newest Torch before 2.14, whose headers accept it.
    older = [*names, "torch212-cxx11-cu130-x86_64-linux"]
    assert conformance.choose_variant(older, 17) == "torch213-cxx11-cu130-x86_64-linux"
    assert conformance.choose_variant(older, 20) == "torch214-cxx11-cu130-x86_64-linux"
    assert conformance.choose_variant(stable, 17) == "torch-stable-abi29-cu130-x86_64-linux"
    kernels = {"a": ["8.0", "9.0a"], "b": ["10.0a", "12.0a"], "c": ["7.5", "12.1+PTX"]}
    assert conformance.choose_archs(kernels) == ["9.0", "10.0a", "7.5"]
    assert conformance.choose_archs({"a": ["9.0+PTX"]}) == ["9.0"]


def test_the_standard_a_kernel_pins_is_read_from_its_flags() -> None:
    kernels = {
        "a": {"cuda-flags": ["-O3", "-std=c++17", "--use_fast_math"], "cxx-flags": None},
        "b": {"cxx-flags": ["-std=gnu++20"]},
        "c": {"cuda-flags": ["-DSTD=-std=c++14"]},
    }
    assert conformance.pinned_standard(kernels) == 17
    assert conformance.pinned_standard({"b": kernels["b"], "c": kernels["c"]}) == 20
    assert conformance.pinned_standard({"c": kernels["c"]}) is None


def test_the_table_lists_every_kernel() -> None:
    outcomes = {
        "relu": Outcome("relu", PASS, 75.0, "torch214-cxx11-cu130-x86_64-linux", "9.0"),
        "natten": Outcome(
            "natten", FAIL, 30.0, error="a|b `c`", whose=conformance.SOURCES, reason="real"
        ),
    }
    text = conformance.render_table(KERNELS, outcomes, "40d4194f")
    rows = [line for line in text.splitlines() if line.startswith("| ") and "---" not in line]
    assert [row.split(" | ")[0] for row in rows[1:]] == ["| relu", "| rotary", "| natten"]
    assert "**1 of 3** pass." in text
    assert "| relu | 1 KiB | pass | 1.2 min |" in text
    assert "| rotary | 1 KiB | not run yet |" in text
    assert "`a\\|b 'c'`" in text and "the kernel's sources: real" in text


def test_resume_skips_recorded_kernels_and_redoes_named_ones(tmp_path: Path) -> None:
    state = tmp_path / "state.json"
    built: list[str] = []
    tables: list[list[str]] = []

    def build(name: str) -> Outcome:
        built.append(name)
        return Outcome(name, PASS, 1.0)

    def write(outcomes: object) -> None:
        tables.append(sorted(outcomes))  # type: ignore[call-overload]

    conformance.resume(KERNELS[:2], build, state, write)
    assert built == ["relu", "rotary"] and tables[0] == ["relu"]
    conformance.resume(KERNELS, build, state, write)
    assert built == ["relu", "rotary", "natten"]
    conformance.resume(KERNELS, build, state, write, redo=["rotary"])
    assert built[-1] == "rotary" and len(built) == 4
    assert sorted(conformance.read_state(state)) == ["natten", "relu", "rotary"]


def test_no_kernel_starts_after_the_stop_time(tmp_path: Path) -> None:
    past = datetime.datetime.now(datetime.timezone.utc) - datetime.timedelta(minutes=1)
    built: list[str] = []
    conformance.resume(
        KERNELS,
        lambda name: built.append(name) or Outcome(name, PASS, 1.0),  # type: ignore[func-returns-value]
        tmp_path / "state.json",
        lambda outcomes: None,
        stop_at=past,
    )
    assert built == []


def test_the_runner_runs_conformance_only_when_named() -> None:
    import runner

    assert "conformance" in runner.BENCHMARKS
    assert "conformance" not in runner.selected(None)
    assert runner.selected(["conformance"]) == ["conformance"]


def test_a_reviewed_verdict_applies_while_the_error_is_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setitem(
        conformance.REVIEWED, "relu", ("No module named 'x'", conformance.KERNELNIX, "why")
    )
    failed = Outcome("relu", FAIL, 1.0, error="[import] No module named 'x'", reason="guess")
    text = conformance.render_table(KERNELS[:1], {"relu": failed}, "snap")
    assert "| kernelnix: why |" in text
    failed.error = "another error"
    text = conformance.render_table(KERNELS[:1], {"relu": failed}, "snap")
    assert "| guess |" in text


def test_an_outcome_from_a_status_and_a_log() -> None:
    variant = "torch214-cxx11-cu130-x86_64-linux"
    checked = f"{variant}  [policy kernel, python-abi 3.9, import]\nok    {variant}: fine\n"

    def outcome(status: int | None, log: str, cap: float = 1800, early: bool = False) -> Outcome:
        start = Outcome("k", PASS, 600.0, variant, "9.0")
        return conformance.outcome_of(start, status, log, cap, early)

    assert outcome(0, checked).result == PASS
    assert outcome(0, checked.replace(", import", "")).result == FAIL  # no import check
    late = outcome(None, "[3/76] Building CUDA object a.cu.o\n", cap=120)
    assert (late.result, late.reason) == (
        conformance.TIMEOUT,
        "timeout at 10 min (cap 2 min, below the default 30), 3 of 76 build steps done",
    )
    assert outcome(None, "", early=True).reason == "stopped at 10 min (session ended)"
    error = "/w/project/kernel/a.cpp:7:10: fatal error: cutlass/numeric_types.h: No such file"
    failed = outcome(None, f"[1/9] x\n{error}\n")
    assert failed.result == FAIL
    assert failed.error == (
        "a.cpp:7:10: fatal error: cutlass/numeric_types.h: No such file "
        "(then stopped at the cap, 10 min)"
    )


def test_the_table_shows_environment_paths_from_the_environment() -> None:
    error = "/root/.cache/kernelnix/environments/7ae1-2.14-cuda-13/torch/include/ATen/ATen.h:5:2: x"
    failed = Outcome("relu", FAIL, 1.0, error=error, whose=conformance.SOURCES, reason="r")
    text = conformance.render_table(KERNELS[:1], {"relu": failed}, "snap")
    assert "`torch/include/ATen/ATen.h:5:2: x`" in text
