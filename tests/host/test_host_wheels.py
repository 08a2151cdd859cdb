"""kernelnix.host.host_wheels against a package index served on 127.0.0.1
(PEP 691 JSON pages and real wheel files): Torch's CUDA flavor read from its
torch/version.py, its requirements followed with markers and extras, the pins
of cuda-toolkit winning over looser requirements, nvcc of the pinned release,
CPU sets on the CUDA wheel, and the reason for a build set PyPI lacks."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from package_index import serve_index, wheel

from kernelnix.commands.lock import lock_wheels
from kernelnix.host import host_wheels
from kernelnix.host.host_wheels import Resolver, lock_glibc_targets, lock_host, lock_host_file
from kernelnix.variants.names import build_set_key

LINUX = 'platform_system == "Linux"'


MANYLINUX = "py3-none-manylinux_2_27_x86_64"


ZIGLANG_TAG = "py3-none-manylinux_2_12_x86_64.manylinux2010_x86_64.musllinux_1_1_x86_64"
ZIGLANG_ARM_TAG = "py3-none-manylinux_2_17_aarch64.manylinux2014_aarch64.musllinux_1_1_aarch64"

PACKAGES = {
    "ziglang": [
        wheel("ziglang", "0.17.0", ZIGLANG_TAG, [], {"ziglang/zig": ""}),
        wheel("ziglang", "0.17.0", ZIGLANG_ARM_TAG, [], {"ziglang/zig": ""}),
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
    "glibc-target": {
        "glibc": "2.27",
        "ziglang": "0.17.0",
        "systems": ["x86_64-linux", "aarch64-linux", "riscv64-linux"],
    },
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
    resolver = Resolver(index, log=lambda line: None)
    lock = lock_host(MATRIX, resolver, ["cp311"], log=lambda line: None)
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
    # The build sets' wheels, for the lock's file table.
    named = {n for s in sets.values() for n in (*s["wheels"], *s["toolkit"])}
    assert named <= set(resolver.files)


def test_the_glibc_target_of_each_system_is_the_pinned_ziglang_wheel(index: str) -> None:
    locked, missing = lock_glibc_targets(
        Resolver(index, log=lambda line: None), MATRIX["glibc-target"]
    )
    # The pinned release, not the newest; aarch64-linux's too (the hermetic
    # toolchain's sysroot), though the host toolchain builds on x86_64 only.
    assert locked == {
        "x86_64-linux": {"glibc": "2.27", "wheel": f"ziglang-0.17.0-{ZIGLANG_TAG}.whl"},
        "aarch64-linux": {"glibc": "2.27", "wheel": f"ziglang-0.17.0-{ZIGLANG_ARM_TAG}.whl"},
    }
    # riscv64 is not a system kernelnix locks.
    assert missing == {}


def _lock_file(tmp_path: Path, index: str) -> Path:
    """A lock whose host part lists x86_64-linux's environments, resolved here,
    a stale aarch64-linux glibc target naming a wheel that is not on the index,
    and a `torch` part."""
    path = tmp_path / "lock.json"
    lock_host_file(path, index, ["cp311"], lambda line: None, MATRIX, systems=["x86_64-linux"])
    data = json.loads(path.read_text())
    stale = {"url": "https://example.invalid/stale.whl", "hash": "sha256-AAAA"}
    data["host"]["wheels"]["stale-1.0-py3-none-any.whl"] = stale
    data["host"]["glibc-target"] = {
        "aarch64-linux": {"glibc": "2.17", "wheel": "stale-1.0-py3-none-any.whl"}
    }
    data["torch"] = {"2.13.0": {"note": "the torch part, untouched"}}
    path.write_text(json.dumps(data))
    return path


def test_one_part_of_one_system_is_relocked_and_the_rest_stays(tmp_path: Path, index: str) -> None:
    path = _lock_file(tmp_path, index)
    before = json.loads(path.read_text())
    missing = host_wheels.lock_glibc_target_file(path, index, lambda line: None, MATRIX)
    after = json.loads(path.read_text())
    assert missing == []
    zig_x86, zig_arm = (f"ziglang-0.17.0-{tag}.whl" for tag in (ZIGLANG_TAG, ZIGLANG_ARM_TAG))
    assert after["host"]["glibc-target"] == {
        "aarch64-linux": {"glibc": "2.27", "wheel": zig_arm},
        "x86_64-linux": {"glibc": "2.27", "wheel": zig_x86},
    }
    # The environments, their wheels and the other parts are as they were; the
    # wheel nothing names any more is gone.
    for part in ("environments", "missing", "noarch"):
        assert after["host"][part] == before["host"][part]
    assert after["torch"] == before["torch"]
    wheels = after["host"]["wheels"]
    assert set(wheels) == set(before["host"]["wheels"]) - {"stale-1.0-py3-none-any.whl"} | {
        zig_x86,
        zig_arm,
    }
    assert all(
        wheels[n] == before["host"]["wheels"][n] for n in wheels if n in before["host"]["wheels"]
    )
    assert wheels[zig_arm]["hash"].startswith("sha256-")


def test_the_environments_of_one_system_are_added_to_the_others(tmp_path: Path, index: str) -> None:
    path = _lock_file(tmp_path, index)
    before = json.loads(path.read_text())
    arm_matrix = {
        **MATRIX,
        "build-sets": [
            {**b, "systems": ["x86_64-linux", "aarch64-linux"]} for b in MATRIX["build-sets"]
        ],
    }
    # The index has no aarch64 Torch: each aarch64 build set is missing, with why;
    # x86_64-linux's environments stay.
    result = lock_host_file(
        path, index, ["cp311"], lambda line: None, arm_matrix, ["aarch64-linux"]
    )
    after = json.loads(path.read_text())
    assert result.locked == []
    assert "2.13-cpu cp311 aarch64-linux: " in "\n".join(result.missing)
    assert after["host"]["environments"] == before["host"]["environments"]
    assert after["host"]["missing"]["x86_64-linux"] == before["host"]["missing"]["x86_64-linux"]
    assert set(after["host"]["missing"]["aarch64-linux"]["cp311"]) == {
        "2.13-cpu",
        "2.13-cuda-13",
        "2.13-cuda-12.6",
    }


def test_lock_wheels_only_glibc_target_writes_that_part(
    tmp_path: Path, index: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = _lock_file(tmp_path, index)
    before = json.loads(path.read_text())
    monkeypatch.setattr(host_wheels, "matrix_data", lambda: MATRIX)
    done = CliRunner().invoke(
        lock_wheels,
        [
            "--only",
            "glibc-target",
            "--system",
            "aarch64-linux",
            "--pypi",
            index,
            "--lock-file",
            str(path),
        ],
    )
    assert done.exit_code == 0, done.output
    after: dict[str, Any] = json.loads(path.read_text())
    # aarch64-linux's target is relocked, x86_64-linux's kept as it was (none).
    assert after["host"]["glibc-target"] == {
        "aarch64-linux": {"glibc": "2.27", "wheel": f"ziglang-0.17.0-{ZIGLANG_ARM_TAG}.whl"}
    }
    assert {k: v for k, v in after.items() if k != "host"} == {
        k: v for k, v in before.items() if k != "host"
    }


def test_a_build_set_key_is_the_plan_version() -> None:
    assert build_set_key("2.13", "cuda", "13.0") == "2.13-cuda-13"
    assert build_set_key("2.15", "cuda", "13.2") == "2.15-cuda-13.2"
    assert build_set_key("2.13", "xpu", "2026.1.0") == "2.13-xpu-2026.1"
    assert build_set_key("2.13", "cpu", None) == "2.13-cpu"
