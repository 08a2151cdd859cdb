"""Whether this machine has the device a variant's tests need, asked at the moment
ci-test runs (`python -m kernelnix.checks.ci_device`), in the Python and Torch the
tests will run in.

The same `nix run .#ci-test` runs on machines with and without a GPU, so the device
is looked for when the script runs, never when the flake is evaluated. It is
looked for the way kernels' own tests choose their device: a test that finds
`torch.cuda.is_available()` false puts its tensors on the CPU, and a CUDA-only op
then fails on them. So a variant that needs a device is tested only where its
Torch sees one.

    python -m kernelnix.checks.ci_device probe BACKEND
        exit 0 when the device is here; else print why not on stdout, exit 1
    python -m kernelnix.checks.ci_device require BACKEND VARIANT
        exit 0 when the device is here; else one sentence on stderr, exit 2
"""

from __future__ import annotations

import ctypes
import importlib
import sys
from collections.abc import Callable
from types import ModuleType

# What each backend's tests run on, as people name it.
DEVICES = {
    "cann": "Ascend NPU",
    "cuda": "CUDA",
    "metal": "Metal (MPS)",
    "neuron": "AWS Neuron",
    "rocm": "ROCm",
    "tpu": "TPU",
    "xpu": "XPU",
}


def needs_device(backend: str) -> bool:
    """Variants of every backend but the CPU's run their tests on a device."""
    return backend in DEVICES


def _first_sentence(error: BaseException) -> str:
    text = str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__
    return text.split(". ")[0].rstrip(".")


def _gpu(torch: ModuleType, build: str | None, kind: str) -> str | None:
    """CUDA and ROCm: Torch built for the kind, and a GPU it can use."""
    if build is None:
        return f"Torch {torch.__version__} is built without {kind}"
    if torch.cuda.is_available():
        return None
    # Torch says why: RuntimeError (no driver, no device) or AssertionError.
    try:
        torch.cuda.init()
    except Exception as error:
        return f"Torch {torch.__version__}: {_first_sentence(error)}"
    return f"Torch {torch.__version__} sees no {kind} device"


def _cuda(torch: ModuleType) -> str | None:
    return _gpu(torch, torch.version.cuda, "CUDA")


def _rocm(torch: ModuleType) -> str | None:
    return _gpu(torch, getattr(torch.version, "hip", None), "ROCm")


def _xpu(torch: ModuleType) -> str | None:
    xpu = getattr(torch, "xpu", None)
    if xpu is not None and xpu.is_available():
        return None
    return f"torch.xpu.is_available() is false in Torch {torch.__version__}"


def _metal(torch: ModuleType) -> str | None:
    if torch.backends.mps.is_available():
        return None
    return f"torch.backends.mps.is_available() is false in Torch {torch.__version__}"


def _with_module(name: str) -> Callable[[ModuleType], str | None]:
    """Backends whose Torch comes as a package of its own (torch_npu, ...): there
    when it imports."""

    def check(torch: ModuleType) -> str | None:
        try:
            importlib.import_module(name)
        except ImportError as error:
            return f"{name} does not import beside Torch {torch.__version__} ({error})"
        return None

    return check


CHECKS: dict[str, Callable[[ModuleType], str | None]] = {
    "cann": _with_module("torch_npu"),
    "cuda": _cuda,
    "metal": _metal,
    "neuron": _with_module("torch_neuronx"),
    "rocm": _rocm,
    "tpu": _with_module("torch_xla"),
    "xpu": _xpu,
}


def _cuda_driver() -> str | None:
    """Without Torch (a tvm-ffi variant whose tests get none): the CUDA driver's
    own count of devices."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return "no NVIDIA driver (libcuda.so.1) is installed"
    count = ctypes.c_int(0)
    if driver.cuInit(0) != 0 or driver.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return "the NVIDIA driver finds no device"
    return None if count.value > 0 else "the NVIDIA driver finds no device"


def missing_device(backend: str) -> str | None:
    """Why this machine has no device for `backend`'s tests, or None when it has one."""
    if not needs_device(backend):
        return None
    try:
        torch = importlib.import_module("torch")
    except ImportError:
        if backend == "cuda":
            return _cuda_driver()
        return f"there is no Torch here to look for a {DEVICES[backend]} device with"
    return CHECKS[backend](torch)


def main(argv: list[str]) -> int:
    mode, backend, *rest = argv
    why = missing_device(backend)
    if why is None:
        return 0
    device = DEVICES[backend]
    if mode == "probe":
        print(f"no {device} device here ({why})")
        return 1
    (variant,) = rest
    print(
        f"ci-test: {variant} needs a {device} device, and this machine has none ({why}); "
        "run its tests on a machine with one (`nix run .#ci-test` tests the best variant "
        "this machine can run)",
        file=sys.stderr,
    )
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
