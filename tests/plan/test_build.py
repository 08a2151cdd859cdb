"""The build plan: complete, deterministic, and the CLI around it."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import EXAMPLES

from kernelnix.cli import main
from kernelnix.config import load_config
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import SCHEMA_VERSION


def test_plan_is_byte_for_byte_deterministic() -> None:
    options = PlanOptions(unique_id="abc1234")
    first = build_plan(load_config(EXAMPLES / "relu"), options).to_json()
    second = build_plan(load_config(EXAMPLES / "relu"), options).to_json()
    assert first == second
    plan = json.loads(first)
    assert plan["schema-version"] == SCHEMA_VERSION
    assert plan["build-toml-sha256"] and plan["unique-id"] == "abc1234"


def test_a_kernel_outside_git_gets_an_id_from_its_files(tmp_path: Path) -> None:
    kernel = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("build"))

    def plan_ids() -> tuple[str, set[str]]:
        plan = build_plan(load_config(kernel))
        ops = {v.ops_id for per_system in plan.variants.values() for v in per_system.values()}
        return plan.unique_id, ops

    unique, ops = plan_ids()
    assert plan_ids() == (unique, ops)  # nothing changed: a rebuild recompiles nothing
    assert all(op.endswith(f"_{unique}") for op in ops)
    (kernel / "README.md").write_text("not a build input\n")
    assert plan_ids()[0] == unique
    for source in ("relu_cuda/relu.cu", "torch-ext/relu/__init__.py"):
        with (kernel / source).open("a") as file:
            file.write("\n")
        changed = plan_ids()[0]
        assert changed != unique, source
        unique = changed


def test_plan_resolves_each_variant() -> None:
    plan = build_plan(load_config(EXAMPLES / "relu"), PlanOptions(unique_id="abc1234"))
    cuda = plan.variants["x86_64-linux"]["torch213-cxx11-cu126-x86_64-linux"]
    assert cuda.kernels == {"relu": ["7.5", "8.0", "9.0"]}
    assert cuda.ops_id == "_relu_cuda_abc1234"
    assert cuda.metadata.backend.to_data() == {"type": "cuda", "archs": ["7.5", "8.0", "9.0"]}
    cpu = plan.variants["x86_64-linux"]["torch213-cxx11-cpu-x86_64-linux"]
    assert cpu.kernels == {"relu_cpu": None} and cpu.archs is None
    metal = plan.variants["aarch64-darwin"]["torch213-metal-aarch64-darwin"]
    assert metal.macos_deployment_target == "26"
    assert plan.systems["x86_64-linux"].ci_variant == "torch214-cxx11-cu126-x86_64-linux"
    assert "relu_cpu/relu_cpu.cpp" in plan.sources
    assert "torch-ext/relu/__init__.py" in plan.sources
    assert plan.kernels["relu"].src == ["relu_cuda/relu.cu"]


def test_empty_arch_intersection_is_a_user_error(tmp_path: Path) -> None:
    (tmp_path / "build.toml").write_text(
        '[general]\nname = "demo"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
        'backends = ["cuda"]\n[torch]\nsrc = ["b.cpp"]\n[kernel.attn]\nbackend = "cuda"\n'
        'depends = []\nsrc = ["a.cu"]\ncuda-capabilities = ["10.0"]\n'
    )
    (tmp_path / "b.cpp").write_text("")
    (tmp_path / "a.cu").write_text("")
    result = CliRunner().invoke(main, ["plan", str(tmp_path)])
    assert result.exit_code == 2
    assert "kernel 'attn'" in result.output and "CUDA 12.6" in result.output
    assert not (tmp_path / "kernelnix-plan.json").exists()
    # The kernel's cuda-minver skips the old toolkits instead.
    text = (tmp_path / "build.toml").read_text() + 'cuda-minver = "12.8"\n'
    (tmp_path / "build.toml").write_text(text)
    result = CliRunner().invoke(main, ["plan", str(tmp_path), "--unique-id", "x1"])
    assert result.exit_code == 0, result.output
    plan = json.loads((tmp_path / "kernelnix-plan.json").read_text())
    assert plan["variants"]["x86_64-linux"]["torch213-cxx11-cu126-x86_64-linux"]["kernels"] == {}
    assert plan["variants"]["x86_64-linux"]["torch213-cxx11-cu130-x86_64-linux"]["kernels"] == {
        "attn": ["10.0"]
    }


def test_list_variants_cli() -> None:
    runner = CliRunner()
    result = runner.invoke(
        main, ["list-variants", str(EXAMPLES / "relu"), "--system", "aarch64-darwin"]
    )
    assert result.exit_code == 0
    assert result.stdout.split() == [
        "torch212-cpu-aarch64-darwin",
        "torch212-metal-aarch64-darwin",
        "torch213-cpu-aarch64-darwin",
        "torch213-metal-aarch64-darwin",
        "torch214-cpu-aarch64-darwin",
        "torch214-metal-aarch64-darwin",
        "torch215-cpu-aarch64-darwin",
        "torch215-metal-aarch64-darwin",
    ]
    result = runner.invoke(
        main, ["list-variants", str(EXAMPLES / "relu"), "--all-systems", "--json"]
    )
    data = json.loads(result.stdout)
    # kernel-builder's 38 bundle variants less those of backends relu lacks (none), plus
    # its non-bundle Torch 2.11 CPU one, plus 6 of Torch 2.15: 45 in all.
    assert len([n for s in data.values() for n in s]) == 45
    assert data["x86_64-linux"]["torch212-cxx11-rocm71-x86_64-linux"]["archs"] == [
        "gfx90a",
        "gfx942",
    ]


@pytest.mark.parametrize(
    "args", [["--system", "riscv64-linux"], ["--system", "x86_64-linux", "--all-systems"]]
)
def test_list_variants_bad_options_exit_2(args: list[str]) -> None:
    result = subprocess.run(
        ["kernelnix", "list-variants", str(EXAMPLES / "relu"), *args],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 2
    assert "Traceback" not in result.stderr and "error:" in result.stderr


def test_plan_cli_writes_the_plan_file(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    result = CliRunner().invoke(
        main, ["plan", str(EXAMPLES / "relu-noarch"), "-o", str(target), "--unique-id", "abc1234"]
    )
    assert result.exit_code == 0, result.output
    plan = json.loads(target.read_text())
    assert plan["framework"] == "torch-noarch"
    assert set(plan["variants"]["x86_64-linux"]) == {
        "torch-cpu",
        "torch-cuda",
        "torch-rocm",
        "torch-xpu",
    }
    assert not list(tmp_path.glob(".*.tmp"))
