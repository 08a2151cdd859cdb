"""kernelnix.host.host_wheels against a package index served on 127.0.0.1
(PEP 691 JSON pages and real wheel files): Torch's CUDA flavor read from its
torch/version.py, its requirements followed with markers and extras, the pins
of cuda-toolkit winning over looser requirements, nvcc of the pinned release,
CPU sets on the CUDA wheel, and the reason for a build set PyPI lacks."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from package_index import serve_index, wheel

from kernelnix.host.host_wheels import lock_host
from kernelnix.variants.names import build_set_key

LINUX = 'platform_system == "Linux"'


MANYLINUX = "py3-none-manylinux_2_27_x86_64"


ZIGLANG_TAG = "py3-none-manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64"

PACKAGES = {
    "ziglang": [
        wheel("ziglang", "0.17.0", ZIGLANG_TAG, [], {"ziglang/zig": ""}),
        wheel("ziglang", "0.18.0", ZIGLANG_TAG, [], {"ziglang/zig": ""}),
    ],
    "torch": [
        wheel(
            "torch",
            "2.13.0",
            "cp311-cp311-manylinux_2_28_x86_64",
            [
                "filelock",
                "sympy>=1.13.3",
                f"cuda-toolkit[cublas,cudart]==13.0.3; {LINUX}",
                f"nvidia-cudnn-cu13==9.20.0.48; {LINUX}",
                f'triton==3.7.1; {LINUX} and python_version < "3.15"',
                'nvidia-never==1.0; platform_system == "Windows"',
            ],
            {"torch/version.py": "__version__ = '2.13.0+cu130'\ncuda = '13.0'\n"},
        ),
    ],
    "filelock": [wheel("filelock", "3.20.0", "py3-none-any", [], {"filelock/__init__.py": ""})],
    "sympy": [wheel("sympy", "1.14.0", "py3-none-any", ["mpmath<1.4,>=1.1.0"], {})],
    "mpmath": [wheel("mpmath", "1.3.0", "py3-none-any", [], {})],
    "triton": [wheel("triton", "3.7.1", "cp311-cp311-manylinux_2_27_x86_64", [], {})],
    "cuda-toolkit": [
        wheel(
            "cuda-toolkit",
            "13.0.3.0",
            "py2.py3-none-any",
            [
                'nvidia-cublas==13.1.1.3.*; sys_platform == "linux" and extra == "cublas"',
                'nvidia-cuda-runtime==13.0.96.*; sys_platform == "linux" and extra == "cudart"',
                'nvidia-cuda-nvcc==13.0.88.*; sys_platform == "linux" and extra == "nvcc"',
                'nvidia-cuda-runtime==13.0.96.*; sys_platform == "linux" and extra == "nvcc"',
            ],
            {},
        ),
    ],
    "nvidia-cublas": [
        wheel("nvidia-cublas", "13.1.1.3", MANYLINUX, [], {}),
        wheel("nvidia-cublas", "13.10.0.20", MANYLINUX, [], {}),
    ],
    "nvidia-cudnn-cu13": [
        wheel("nvidia-cudnn-cu13", "9.20.0.48", MANYLINUX, ["nvidia-cublas"], {}),
    ],
    "nvidia-cuda-runtime": [wheel("nvidia-cuda-runtime", "13.0.96", MANYLINUX, [], {})],
    "nvidia-cuda-nvcc": [
        wheel("nvidia-cuda-nvcc", "13.0.88", MANYLINUX, [], {}),
        wheel("nvidia-cuda-nvcc", "13.0.88", "py3-none-win_amd64", [], {}),
    ],
}


@pytest.fixture
def index() -> Iterator[str]:
    with serve_index(PACKAGES) as url:
        yield url


MATRIX = {
    "hermetic": {"torch-releases": {"2.13": "2.13.0"}},
    "glibc-target": {"glibc": "2.27", "ziglang": "0.17.0", "systems": ["x86_64-linux"]},
    "build-sets": [
        {"torch": "2.13", "backend": "cpu", "systems": ["x86_64-linux"]},
        {
            "torch": "2.13",
            "backend": "cuda",
            "version": "13.0",
            "systems": ["x86_64-linux"],
            "bundle": True,
        },
        {"torch": "2.13", "backend": "cuda", "version": "12.6", "systems": ["x86_64-linux"]},
        {"torch": "2.13", "backend": "rocm", "version": "7.1", "systems": ["x86_64-linux"]},
    ],
}


def test_lock_host_resolves_each_build_set(index: str) -> None:
    lock = lock_host(MATRIX, index, ["cp311"], log=lambda line: None)
    sets = lock["environments"]["x86_64-linux"]["cp311"]
    torch = "torch-2.13.0-cp311-cp311-manylinux_2_28_x86_64.whl"
    cublas = f"nvidia_cublas-13.1.1.3-{MANYLINUX}.whl"  # the pin, not the newer 13.10
    cudnn = f"nvidia_cudnn_cu13-9.20.0.48-{MANYLINUX}.whl"
    runtime = f"nvidia_cuda_runtime-13.0.96-{MANYLINUX}.whl"
    toolkit = "cuda_toolkit-13.0.3.0-py2.py3-none-any.whl"
    nvcc = f"nvidia_cuda_nvcc-13.0.88-{MANYLINUX}.whl"
    python = {
        "filelock-3.20.0-py3-none-any.whl",
        "sympy-1.14.0-py3-none-any.whl",
        "mpmath-1.3.0-py3-none-any.whl",  # what sympy requires
    }
    triton = "triton-3.7.1-cp311-cp311-manylinux_2_27_x86_64.whl"
    # A CPU set on the CUDA wheel of the release: Torch, what it loads and its
    # Python requirements, without the CUDA build's Python packages (triton).
    cpu = sets["2.13-cpu"]
    assert (cpu["torch"], cpu["wheels"][0], cpu["toolkit"]) == ("2.13.0+cu130", torch, [])
    assert set(cpu["wheels"]) == {torch, toolkit, cudnn, cublas, runtime, *python}
    # A CUDA set: the toolkit's pins first, then what Torch requires, triton
    # included; nothing Windows-only.
    cuda = sets["2.13-cuda-13"]
    assert (cuda["torch"], cuda["wheels"][0]) == ("2.13.0+cu130", torch)
    assert set(cuda["wheels"]) == {torch, cudnn, cublas, triton, *python}
    assert cuda["toolkit"] == [toolkit, runtime, nvcc]
    # A noarch CUDA variant loads in the newest bundled CUDA set.
    assert lock["noarch"] == {"x86_64-linux": {"cp311": {"cuda": "2.13-cuda-13"}}}
    assert "2.13-rocm-7.1" not in sets
    reason = lock["missing"]["x86_64-linux"]["cp311"]["2.13-cuda-12.6"]
    assert reason.startswith("torch 2.13.0+cu126 (cp311) is not locked: PyPI serves cu130")
    assert "kernelnix lock-wheels" in reason
    # The glibc target: the pinned ziglang release, not the newest.
    ziglang = f"ziglang-0.17.0-{ZIGLANG_TAG}.whl"
    assert lock["glibc-target"] == {"x86_64-linux": {"glibc": "2.27", "wheel": ziglang}}
    # Every wheel named is recorded once, with the index's sha256 as an SRI hash.
    named = {n for s in sets.values() for n in (*s["wheels"], *s["toolkit"])}
    assert set(lock["wheels"]) == named | {ziglang}
    assert all(w["hash"].startswith("sha256-") for w in lock["wheels"].values())


def test_a_build_set_key_is_the_plan_version() -> None:
    assert build_set_key("2.13", "cuda", "13.0") == "2.13-cuda-13"
    assert build_set_key("2.15", "cuda", "13.2") == "2.15-cuda-13.2"
    assert build_set_key("2.13", "xpu", "2026.1.0") == "2.13-xpu-2026.1"
    assert build_set_key("2.13", "cpu", None) == "2.13-cpu"
