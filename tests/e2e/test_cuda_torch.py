"""CUDA variants built for real against a CUDA build of Torch (2.14.1, CUDA 13.0,
from PyPI) with /usr/local/cuda's nvcc, on this GPU-less machine: `kernelnix build
--local` and `nix build .#<variant>` (host toolchain) of examples/fused-scale, a
multi-file kernel on ATen's CUDA stream API (whose headers include cuSPARSE's, which
only the Torch wheel's `nvidia-*` packages carry). Each build passes the post-build
checks and loads through `kernels.get_local_kernel`: the ops are registered in the
variant's namespace with their schemas and a CUDA kernel; cuobjdump lists exactly the
planned archs. Calling the ops needs a GPU: nothing runs them.

The CUDA Torch lives in its own virtual environment (tests/support/cuda_venv.py).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from cuda_venv import CUDA_VARIANT, CudaTorch
from handmade import make_variant
from nix_projects import clone_worktree, git, nix, nix_environment
from paths import BUILD_OUTPUTS, EXAMPLE_COPY_IGNORE, EXAMPLES

from kernelnix.config import load_config
from kernelnix.plan.build import PlanOptions, build_plan

VARIANT = CUDA_VARIANT

pytestmark = [pytest.mark.slow]


def planned_archs() -> list[str]:
    plan = build_plan(
        load_config(EXAMPLES / "fused-scale"),
        PlanOptions(systems=("x86_64-linux",), unique_id="archs1"),
    )
    archs = plan.variants["x86_64-linux"][VARIANT].archs
    assert archs == ["8.0", "9.0a"]
    return archs


def cuobjdump_archs(library: Path) -> list[str]:
    """The cubin archs cuobjdump lists (the nvidia-cuda-cuobjdump wheel's tool)."""
    found = sorted(
        Path(p)
        for p in subprocess.run(
            ["python3", "-c", "import nvidia, sys; print(*nvidia.__path__, sep='\\n')"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
    )
    tools = [t for root in found for t in sorted(root.glob("*/bin/cuobjdump"))]
    assert tools, "cuobjdump is not installed (pip install nvidia-cuda-cuobjdump)"
    listed = subprocess.run(
        [tools[0], "--list-elf", library], capture_output=True, text=True, check=True
    ).stdout
    return sorted(
        {f"{m[0]}.{m[1]}{m[2]}" for m in re.findall(r"\.sm_(\d+?)(\d)(a?)\.cubin", listed)}
    )


LOAD = """
import json, sys, torch
from pathlib import Path
from kernels import get_local_kernel
bundle = Path(sys.argv[1])
kernel = get_local_kernel(bundle)
variant = bundle / sys.argv[2]
namespace = json.loads((variant / "metadata.json").read_text())["id"]
ops = getattr(torch.ops, namespace)
report = {"module": kernel.__name__, "namespace": namespace, "torch-cuda": torch.version.cuda}
for name in ("scale_add", "sum_squares"):
    op = getattr(ops, name).default
    report[name] = {
        "schema": str(op._schema),
        "cuda": torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CUDA"),
        "cpu": torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CPU"),
    }
print(json.dumps(report))
"""


def check_variant(cuda_torch: CudaTorch, bundle: Path) -> None:
    """Load `bundle` with kernels in the CUDA Torch environment, and check the library."""
    done = subprocess.run(
        [cuda_torch.python, "-c", LOAD, bundle, VARIANT],
        capture_output=True,
        text=True,
        env=cuda_torch.env,
        cwd=bundle.parent,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout.splitlines()[-1])
    namespace = report["namespace"]
    assert report["module"] == namespace and namespace.startswith("_fused_scale_cuda_")
    assert report["torch-cuda"] == "13.0"
    signature = "scale_add(Tensor($0! -> ) out, Tensor x, Tensor y, float alpha) -> ()"
    assert report["scale_add"] == {
        "schema": f"{namespace}::{signature}",
        "cuda": True,
        "cpu": False,
    }
    assert report["sum_squares"]["schema"] == f"{namespace}::sum_squares(Tensor x) -> Tensor"
    assert report["sum_squares"]["cuda"] is True
    (library,) = (bundle / VARIANT).glob("*.so")
    assert cuobjdump_archs(library) == planned_archs()
    needed = subprocess.run(["readelf", "-d", library], capture_output=True, text=True).stdout
    # libtorch_cuda is linked too; the linker keeps only the libraries the code uses.
    for name in ("libc10_cuda.so", "libcudart.so.13", "libtorch_cpu.so"):
        assert name in needed


def test_build_local_against_the_cuda_torch(cuda_torch: CudaTorch, tmp_path: Path) -> None:
    project = tmp_path / "fused-scale"
    shutil.copytree(EXAMPLES / "fused-scale", project, ignore=EXAMPLE_COPY_IGNORE)
    done = subprocess.run(
        [cuda_torch.python, "-m", "kernelnix", "build", "--local", str(project),
         "--variant", VARIANT, "--no-progress"],
        capture_output=True, text=True, env=cuda_torch.env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok    {VARIANT}: no violations" in done.stdout + done.stderr
    check_variant(cuda_torch, project / "build")


# About 80 s, over CI's budget: CUDA through a flake is in CI with the hermetic
# toolchain (test_hermetic.py).
@pytest.mark.heavy
def test_nix_build_with_the_host_toolchain(cuda_torch: CudaTorch, tmp_path: Path) -> None:
    url = clone_worktree(tmp_path / "kernelnix")
    env = {**nix_environment(tmp_path / "registry.json", url), **cuda_torch.env}
    project = tmp_path / "fused-scale"
    shutil.copytree(EXAMPLES / "fused-scale", project, ignore=EXAMPLE_COPY_IGNORE)
    # The host record names the CUDA Torch environment: the flake builds with it.
    subprocess.run(
        [cuda_torch.python, "-m", "kernelnix", "generate", str(project), "--kernelnix-url", url,
         "--toolchain", "host"],
        check=True, capture_output=True, env=env,
    )  # fmt: skip
    record = json.loads((project / "kernelnix-host.json").read_text())
    assert VARIANT not in record["not-buildable"]
    git(project, "init", "-q")
    git(project, "add", "-A")
    nix(project, env, "build", f".#{VARIANT}", "--out-link", "result")
    bundle = tmp_path / "bundle"
    bundle.mkdir()
    (bundle / VARIANT).symlink_to((project / "result" / VARIANT).resolve())
    check_variant(cuda_torch, bundle)


def build_cute_scale(
    cuda_torch: CudaTorch, project: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[str]:
    shutil.copytree(EXAMPLES / "cute-scale", project, ignore=BUILD_OUTPUTS)
    return subprocess.run(
        [cuda_torch.python, "-m", "kernelnix", "build", "--local", str(project),
         "--variant", VARIANT, "--no-progress"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip


def test_cutlass_headers_come_from_the_environment(cuda_torch: CudaTorch, tmp_path: Path) -> None:
    """examples/cute-scale (CuTe, `depends = ["torch", "cutlass_3_8"]`) compiles against
    the headers of the nvidia-cutlass wheel of the build's Python."""
    env = {k: v for k, v in cuda_torch.env.items() if not k.startswith("KERNELNIX_DEP_")}
    done = build_cute_scale(cuda_torch, tmp_path / "cute-scale", env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "dependency cutlass_3_8: CUTLASS 3.8" in done.stdout
    assert "(the nvidia-cutlass package of" in done.stdout
    (library,) = (tmp_path / "cute-scale" / "build" / VARIANT).glob("*.so")
    assert cuobjdump_archs(library) == ["9.0"]


def test_a_dependency_that_is_not_there_is_a_clear_error(
    cuda_torch: CudaTorch, tmp_path: Path
) -> None:
    empty = tmp_path / "no-cutlass"
    empty.mkdir()
    env = {**cuda_torch.env, "KERNELNIX_DEP_CUTLASS_3_8": str(empty)}
    done = build_cute_scale(cuda_torch, tmp_path / "cute-scale", env)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"dependency CUTLASS 3.8 (`cutlass_3_8`): {empty} (from KERNELNIX_DEP_CUTLASS_3_8)" in (
        done.stderr
    )
    assert "pip install 'nvidia-cutlass==3.8.*'" in done.stderr


def test_a_development_build_has_the_chosen_archs_only_and_is_not_uploaded(
    cuda_torch: CudaTorch, tmp_path: Path
) -> None:
    """`--cuda-archs 9.0`: fused-scale's kernels are planned for 8.0 and 9.0a; the
    build compiles 9.0a only, records it, loads, and `upload` refuses it. With
    ccache, the same build of a fresh copy elsewhere compiles nothing again."""
    env = {**cuda_torch.env, "CCACHE_DIR": str(tmp_path / "ccache")}
    env.pop("KERNELNIX_COMPILER_LAUNCHER", None)

    def build(project: Path) -> None:
        shutil.copytree(EXAMPLES / "fused-scale", project, ignore=EXAMPLE_COPY_IGNORE)
        done = subprocess.run(
            [cuda_torch.python, "-m", "kernelnix", "build", "--local", str(project),
             "--variant", VARIANT, "--cuda-archs", "9.0", "--no-progress"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr

    project = tmp_path / "fused-scale"
    build(project)
    variant = project / "build" / VARIANT
    metadata = json.loads((variant / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cuda", "archs": ["9.0a"]}
    assert metadata["provenance"]["kernelnix"]["development-archs"] == ["9.0"]
    (library,) = variant.glob("*.so")
    assert cuobjdump_archs(library) == ["9.0a"]
    loaded = subprocess.run(
        [cuda_torch.python, "-c", LOAD, project / "build", VARIANT],
        capture_output=True, text=True, env=cuda_torch.env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    refused = subprocess.run(
        [cuda_torch.python, "-m", "kernelnix", "upload", "--dry-run", str(project)],
        capture_output=True, text=True, check=False,
        env={**cuda_torch.env, "HF_ENDPOINT": "http://127.0.0.1:9"},
    )  # fmt: skip
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert "provenance.kernelnix.development-archs: a development build for CUDA archs 9.0" in (
        refused.stderr
    )
    assert "rebuild without --cuda-archs" in refused.stderr
    if shutil.which("ccache") is None:
        return
    misses = ccache_counters(env)["cache_miss"]
    assert misses >= 3  # the binding and the two .cu files
    build(tmp_path / "moved" / "fused-scale")
    counters = ccache_counters(env)
    assert counters["cache_miss"] == misses, counters  # nvcc's objects too
    assert counters["direct_cache_hit"] >= 3


def ccache_counters(env: dict[str, str]) -> dict[str, int]:
    out = subprocess.run(
        ["ccache", "--print-stats"], capture_output=True, text=True, env=env, check=True
    ).stdout
    return {k: int(v) for k, v in (line.split("\t") for line in out.splitlines()) if v.isdigit()}


# What pytest does with `-p kernelnix.checks.ci_backend` (this environment has no
# pytest): call its hook, then ask the loader which backend it would pick.
CHOSEN_BACKEND = """
from kernelnix.checks import ci_backend
ci_backend.pytest_configure(None)
from kernels.backends import _select_backend
print(_select_backend(None).name)
"""


@pytest.mark.parametrize(("asked", "expected"), [("cpu", "cpu"), (None, "cuda")])
def test_ci_test_plugin_tells_the_loader_the_variants_backend(
    cuda_torch: CudaTorch, asked: str | None, expected: str
) -> None:
    """kernelnix.checks.ci_backend (ci-test of a CPU variant in a CUDA Torch): with
    KERNELNIX_CI_BACKEND=cpu the loader picks CPU variants; without it, as always,
    the CUDA variants of its CUDA Torch."""
    env = {k: v for k, v in cuda_torch.env.items() if k != "KERNELNIX_CI_BACKEND"}
    if asked:
        env["KERNELNIX_CI_BACKEND"] = asked
    done = subprocess.run(
        [cuda_torch.python, "-c", CHOSEN_BACKEND],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == expected


def test_a_cpu_noarch_variant_is_import_checked_in_a_cuda_torch(
    cuda_torch: CudaTorch, tmp_path: Path
) -> None:
    """The hermetic toolchain checks and tests a CPU noarch variant in the lock's CPU
    Torch, Torch's CUDA wheel: the import check asks the loader for the CPU backend,
    as it does for a compiled CPU variant, instead of skipping it."""
    directory = make_variant(tmp_path / "build", "relu-noarch", "torch-cpu")
    done = subprocess.run(
        [cuda_torch.python, "-m", "kernelnix", "check", str(directory)],
        capture_output=True, text=True, env=cuda_torch.env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert "import check skipped" not in done.stdout, done.stdout
    assert "ok    torch-cpu: no violations" in done.stdout
