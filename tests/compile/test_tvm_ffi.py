"""A tvm-ffi kernel built for real (`build --local`, against the locked
apache-tvm-ffi wheel) and called through the `kernels` loader."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from binary_settings import kernel_policy
from handmade import committed_copy, plan_here
from wheel_locks import lock_with

from kernelnix.checks.binaries import check_binary, load_binaries
from kernelnix.compile.gpu_archs import compiled_archs
from kernelnix.compile.local import build_planned
from kernelnix.host.environments import locked_environment, materialize
from kernelnix.host.machine import why_not_buildable

VARIANT = "tvm-ffi01-cpu-x86_64-linux"
CUDA_VARIANT = "tvm-ffi01-cu130-x86_64-linux"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed"),
    pytest.mark.skipif(sys.platform != "linux", reason="an x86_64-linux variant"),
]


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(the variant directory, the locked apache-tvm-ffi environment it loads with)."""
    copy = committed_copy("relu-tvm-ffi", tmp_path_factory.mktemp("tvm-ffi"))
    plan = plan_here(copy)
    result = build_planned(plan, copy, VARIANT, jobs=1)
    locked = locked_environment(plan.variants["x86_64-linux"][VARIANT])
    assert locked is not None
    return result.built[0], materialize(locked, log=lambda line: None)


def test_the_variant_is_laid_out_like_kernel_builders(built: tuple[Path, Path]) -> None:
    variant, _ = built
    files = sorted(p.name for p in variant.iterdir())
    library = [f for f in files if f.endswith(".so")]
    assert library and library[0].startswith("_relu_tvm_ffi_cpu_")
    assert files == sorted(["__init__.py", "_ops.py", "metadata.json", library[0]])
    assert "tvm_ffi.load_module" in (variant / "_ops.py").read_text()


CALL = """
import sys
from pathlib import Path
import numpy as np
from kernels import get_local_kernel

kernel = get_local_kernel(Path(sys.argv[1]))
x = np.array([-2.0, -0.0, 0.5, 3.0, float("-inf"), float("nan")], dtype=np.float32)
out = np.full_like(x, 42.0)
assert kernel.relu(x, out) is out
print(" ".join(map(str, out.tolist())))
"""


def test_relu_through_the_kernels_loader(built: tuple[Path, Path]) -> None:
    variant, environment = built
    done = subprocess.run(
        [sys.executable, "-c", CALL, str(variant.parent)],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "HF_HUB_OFFLINE": "1", "PYTHONPATH": str(environment)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.split() == ["0.0", "0.0", "0.5", "3.0", "0.0", "nan"]


def test_libtvm_ffi_is_a_needed_library_of_tvm_ffi_variants_only(
    built: tuple[Path, Path],
) -> None:
    variant, _ = built
    binaries, problems = load_binaries(variant, next(variant.glob("*.so")).name)
    assert not problems
    library = binaries[0]
    assert check_binary(library, kernel_policy("tvm-ffi")) == []
    subjects = {v.subject for v in check_binary(library, kernel_policy("arch"))}
    assert subjects == {"libtvm_ffi.so"}


def test_the_cuda_variant_compiles_and_links_with_the_locked_nvcc(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Against the toolkit of the build set of its Torch entry (2.12, CUDA 13.0),
    which the lock has to hold (the tests' lock keeps no build set by default)."""
    work = tmp_path_factory.mktemp("tvm-ffi-cuda")
    monkeypatch.setenv("KERNELNIX_WHEEL_LOCK", str(lock_with(work / "lock.json", ["2.12-cuda-13"])))
    copy = committed_copy("relu-tvm-ffi", work)
    plan = plan_here(copy)
    cuda = plan.variants["x86_64-linux"][CUDA_VARIANT]
    assert why_not_buildable(cuda) is None
    locked = locked_environment(cuda)
    assert locked is not None and "nvidia_cuda_nvcc" in " ".join(w.name for w in locked.wheels)
    # Its post-build checks (kernel policy: libcudart allowed for CUDA) run in the build.
    variant = build_planned(plan, copy, CUDA_VARIANT, jobs=1).built[0]
    library = next(variant.glob("_relu_tvm_ffi_cuda_*.so"))
    assert compiled_archs(library, "cuda") == ["8.0", "9.0"]
    binaries, _ = load_binaries(variant, library.name)
    assert {"libtvm_ffi.so", "libcudart.so.13"} <= set(binaries[0].needed)
