"""What `kernelnix build` says of an object-by-object build
(kernelnix.project.objects), on the log Nix 2.8 wrote for a real one
(tests/data/nix-logs/object-build.internal-json: fused-scale's cu130 variant
after an edit of kernels.cu, `nix build --log-format internal-json` in the
sandbox): one object and the variant built."""

from __future__ import annotations

import itertools
import shutil
import subprocess
from pathlib import Path

import pytest
from paths import TESTS

from kernelnix.project.objects import (
    ObjectProgress,
    ObjectRoots,
    ObjectStep,
    derivations_to_build,
    object_steps,
    where_text,
)

LOG = (TESTS / "data" / "nix-logs" / "object-build.internal-json").read_text().splitlines(True)
VARIANT = "torch213-cxx11-cu130-x86_64-linux"
OBJECT = f"/nix/store/s6cmnqdvfj3h17372mg6gdhbkjah20ds-fused_scale-{VARIANT}-kernels.cu.o.drv"
STEP = ObjectStep("fused_scale_cuda/kernels.cu", VARIANT, "/nix/store/out-kernels.cu.o", "8.0 9.0a")


def rendered(progress: ObjectProgress) -> str:
    return "".join(filter(None, map(progress, LOG)))


def test_a_finished_object_gets_its_progress_line_and_nix_s_own_lines_stay() -> None:
    ticks = itertools.count(0, 37)
    progress = ObjectProgress(
        {OBJECT: STEP}, print_logs=False, clock=lambda: next(ticks), exists=lambda _: True
    )
    text = rendered(progress)
    assert f"building '{OBJECT}'" in text
    assert "[1/1] fused_scale_cuda/kernels.cu (8.0 9.0a) 37 s\n" in text
    # Without -L, no build log; nothing of the machine-readable log shows.
    assert "> " not in text and "@nix" not in text


def test_each_finished_object_is_kept_and_what_keeping_says_is_shown() -> None:
    kept: list[ObjectStep] = []

    def keep(step: ObjectStep) -> str:
        kept.append(step)
        return "kernelnix: not kept\n"

    progress = ObjectProgress({OBJECT: STEP}, print_logs=False, exists=lambda _: True, keep=keep)
    assert "s\nkernelnix: not kept\n" in rendered(progress)
    assert kept == [STEP]
    missing = ObjectProgress({OBJECT: STEP}, print_logs=False, exists=lambda _: False, keep=keep)
    rendered(missing)
    assert kept == [STEP]


@pytest.mark.skipif(shutil.which("nix-store") is None, reason="needs Nix")
def test_a_kept_object_survives_its_deletion_until_its_link_goes(tmp_path: Path) -> None:
    """`nix-store --delete` of one path is a garbage collection of that path."""
    (tmp_path / "kernels.cu.o").write_bytes(b"object " + str(tmp_path).encode())
    stored = subprocess.run(
        ["nix-store", "--add", str(tmp_path / "kernels.cu.o")],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    step = ObjectStep("fused_scale_cuda/kernels.cu", VARIANT, stored, "8.0")
    roots = ObjectRoots(tmp_path / "result-objects")
    assert roots.keep(step) is None
    link = tmp_path / "result-objects" / VARIANT / "fused_scale_cuda" / "kernels.cu.o"
    assert link.resolve() == Path(stored)
    delete = ["nix-store", "--delete", stored]
    assert subprocess.run(delete, capture_output=True, text=True).returncode != 0
    link.unlink()
    subprocess.run(delete, capture_output=True, text=True, check=True)
    assert not Path(stored).exists()


def test_an_object_nix_refuses_to_keep_is_one_line_naming_it(tmp_path: Path) -> None:
    step = ObjectStep("csrc/a.cu", VARIANT, "/nix/store/" + "a" * 32 + "-gone.o")
    said = ObjectRoots(tmp_path / "result-objects").keep(step)
    assert said is not None and said.startswith("kernelnix: csrc/a.cu not kept from garbage")
    assert said.endswith("failed\n") and said.count("\n") == 1


def test_with_print_logs_the_build_log_is_shown_as_nix_shows_it() -> None:
    progress = ObjectProgress({OBJECT: STEP}, print_logs=True, exists=lambda _: True)
    text = rendered(progress)
    assert f"fused_scale-{VARIANT}-kernels.cu.o> compiled /nix/store/" in text
    assert f"fused_scale-{VARIANT}> built /nix/store/" in text


def test_nix_s_colours_are_kept_for_a_terminal_only() -> None:
    line = '@nix {"action":"msg","level":0,"msg":"\\u001b[31;1merror:\\u001b[0m stopped"}\n'
    assert ObjectProgress({}, print_logs=False)(line) == "error: stopped\n"
    coloured = ObjectProgress({}, print_logs=False, colours=True)(line)
    assert coloured == "\x1b[31;1merror:\x1b[0m stopped\n"


def test_an_object_whose_output_is_missing_gets_no_progress_line() -> None:
    """A failed object stops too; Nix's error says what failed."""
    progress = ObjectProgress({OBJECT: STEP}, print_logs=False, exists=lambda _: False)
    assert "[1/1]" not in rendered(progress)


def test_the_objects_to_build_come_from_the_dry_run_and_the_derivations() -> None:
    dry_run = (
        "these 2 derivations will be built:\n"
        f"  {OBJECT}\n"
        f"  /nix/store/zzwjg9ik52ixzdqg67cv8nf8lvqxv4vk-fused_scale-{VARIANT}.drv\n"
        "these 1 paths will be fetched (0.00 MiB download, 0.00 MiB unpacked):\n"
        "  /nix/store/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa-x.whl\n"
    )
    assert len(derivations_to_build(dry_run)) == 2
    shown = {
        OBJECT: {
            "env": {
                "kernelnixStep": "object",
                "objectSource": STEP.source,
                "variant": VARIANT,
                "out": STEP.output,
                "objectArchs": STEP.archs,
            }
        },
        "/nix/store/zzz-variant.drv": {"env": {"variant": VARIANT}},
    }
    assert object_steps(shown) == {OBJECT: STEP}


def test_an_object_is_labelled_by_its_archs_and_by_its_variant_where_needed() -> None:
    """Objects of one variant: a GPU source's archs (`9.0`, as nvcc's); a C++ source,
    compiled for no arch (a CUDA kernel's host code too), its variant; objects of
    several variants (a bundle): both."""
    cpu = ObjectStep("fused_scale_cpu/fused_scale.cpp", "torch213-cxx11-cpu-x86_64-linux", "/o")
    host = ObjectStep("layer_norm/ln_api.cpp", VARIANT, "/h", "8.0 9.0")
    assert ObjectProgress({"h": host}, print_logs=False).label(host) == f" ({VARIANT})"
    other = ObjectStep(STEP.source, "torch213-cxx11-cu126-x86_64-linux", "/p", "8.0 9.0a")
    assert ObjectProgress({OBJECT: STEP}, print_logs=False).label(STEP) == " (8.0 9.0a)"
    assert ObjectProgress({"a": cpu}, print_logs=False).label(cpu) == f" ({cpu.variant})"
    bundle = ObjectProgress({OBJECT: STEP, "b": other, "c": cpu}, print_logs=False)
    assert bundle.label(other) == " (8.0 9.0a, torch213-cxx11-cu126-x86_64-linux)"
    assert bundle.label(cpu) == f" ({cpu.variant})"


def test_where_names_the_builders(tmp_path: Path) -> None:
    assert where_text(None, "") == "on this machine"
    machines = tmp_path / "machines"
    machines.write_text(
        "# ours\nssh-ng://big-1 x86_64-linux - 8\nssh-ng://big-2 x86_64-linux - 8\n"
    )
    assert where_text(0, f"@{machines}") == "on 2 builders (ssh-ng://big-1, ssh-ng://big-2)"
    assert where_text(None, "ssh-ng://a x86_64-linux - 1 ; ssh-ng://b x86_64-linux - 1").startswith(
        "on this machine and on 2 builders"
    )
    assert where_text(None, f"@{tmp_path / 'none'}") == "on this machine"
