"""kernelnix.checks.ci_device, run as ci-test runs it, in this machine's Torch (2.13,
the CPU build): a CUDA, ROCm or XPU variant's tests cannot run here, a CPU
variant's can. tests/e2e/test_community_kernels.py runs it in a CUDA Torch
without a GPU through `nix run .#ci-test`."""

from __future__ import annotations

import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")


def device_check(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelnix.checks.ci_device", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_a_cpu_variant_needs_no_device() -> None:
    done = device_check("probe", "cpu")
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


@pytest.mark.parametrize(
    ("backend", "why"),
    [
        ("cuda", f"no CUDA device here (Torch {torch.__version__} is built without CUDA)"),
        ("rocm", f"no ROCm device here (Torch {torch.__version__} is built without ROCm)"),
        (
            "xpu",
            f"no XPU device here (torch.xpu.is_available() is false in Torch {torch.__version__})",
        ),
    ],
)
def test_probe_says_why_a_device_is_missing(backend: str, why: str) -> None:
    done = device_check("probe", backend)
    assert done.returncode == 1
    assert done.stdout.strip() == why


def test_require_refuses_in_one_sentence_with_status_2() -> None:
    done = device_check("require", "cuda", "torch214-cxx11-cu130-x86_64-linux")
    assert done.returncode == 2 and done.stdout == ""
    (line,) = done.stderr.splitlines()
    assert line == (
        "ci-test: torch214-cxx11-cu130-x86_64-linux needs a CUDA device, and this machine "
        f"has none (Torch {torch.__version__} is built without CUDA); run its tests on a "
        "machine with one (`nix run .#ci-test` tests the best variant this machine can run)"
    )
