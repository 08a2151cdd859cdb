"""kernelnix.host.python_wheels against a package index served on 127.0.0.1
(tests/support/package_index.py): python-depends locked with what they require
(Torch excepted, markers evaluated, stable-ABI wheels of older CPythons taken,
final releases over pre-releases), a name the index lacks recorded with why, and
the modules Torch and the loader require, read from their wheels. Then Torch's
real metadata: what its CUDA build adds over its CPU build."""

from __future__ import annotations

import json
from collections.abc import Iterator
from importlib.metadata import requires, version
from typing import Any

import pytest
from package_index import serve_index, wheel
from packaging.requirements import Requirement
from wheel_locks import LOCK

from kernelnix.host.host_wheels import Resolver, requires_dist
from kernelnix.host.python_wheels import (
    is_cuda_flavor,
    load_time_imports,
    lock_python_depends,
)

LINUX_X86 = "cp311-cp311-manylinux_2_28_x86_64"
PACKAGES = {
    "einops": [
        wheel("einops", "0.8.2", "py3-none-any", [], {"einops/__init__.py": ""}),
        wheel("einops", "0.9.0rc1", "py3-none-any", [], {"einops/__init__.py": ""}),
    ],
    "apache-tvm-ffi": [
        # Newer than the table's `lock` requirement allows.
        wheel("apache-tvm-ffi", "0.2.0", LINUX_X86, [], {"tvm_ffi/__init__.py": ""}),
        wheel(
            "apache-tvm-ffi",
            "0.1.15",
            LINUX_X86,
            ["typing-extensions>=4.13", 'ninja; extra == "cpp"', 'tomli; python_version < "3.11"'],
            {"tvm_ffi/__init__.py": ""},
        ),
    ],
    "typing-extensions": [
        wheel("typing-extensions", "4.16.0", "py3-none-any", [], {"typing_extensions.py": ""})
    ],
    "helper-lib": [
        # A stable-ABI wheel of an older CPython, and a requirement of Torch: the
        # variant has its own Torch.
        wheel("helper-lib", "7.2.2", "cp36-abi3-manylinux_2_28_x86_64", ["torch>=2"], {}),
    ],
    "pyyaml": [
        wheel(
            "pyyaml",
            "6.0.3",
            LINUX_X86,
            [],
            {"yaml/__init__.py": "", "_yaml/__init__.py": "", "yaml/_yaml.cpython-311.so": ""},
        )
    ],
    "packaging": [wheel("packaging", "26.2", "py3-none-any", [], {"packaging/__init__.py": ""})],
    "dsl": [
        wheel("dsl", release, "py3-none-any", requires, {"dsl/__init__.py": ""})
        for release, requires in [("4.7.0", []), ("4.6.1", ["dsl-libs==4.6.1"]), ("4.5.0", [])]
    ],
    "dsl-libs": [wheel("dsl-libs", "4.6.1", "py3-none-any", [], {"dsl_libs/__init__.py": ""})],
    "jinja2": [wheel("jinja2", "3.1.6", "py3-none-any", [], {"jinja2/__init__.py": ""})],
    "triton": [wheel("triton", "3.7.1", LINUX_X86, [], {"triton/__init__.py": ""})],
    "nvidia-cudnn-cu13": [
        wheel("nvidia-cudnn-cu13", "9.20", "py3-none-manylinux_2_27_x86_64", [], {})
    ],
    "torch": [
        wheel(
            "torch",
            "2.13.0",
            LINUX_X86,
            [
                "jinja2",
                'nvidia-cudnn-cu13==9.20; platform_system == "Linux"',
                'triton==3.7.1; platform_system == "Linux"',
                'pyyaml; extra == "pyyaml"',
            ],
            {"torch/__init__.py": ""},
        )
    ],
    "kernels": [
        wheel(
            "kernels",
            "0.17.2",
            "cp38-abi3-manylinux_2_17_x86_64",
            ["packaging>=20", "pyyaml>=6", 'typing-extensions; python_full_version < "3.11"'],
            {"kernels/__init__.py": ""},
        )
    ],
}
TABLE = {
    "general": {
        "einops": {"python": [{"pkg": "einops", "import": "einops"}]},
        "tvm-ffi": {
            "python": [{"pkg": "apache-tvm-ffi", "import": "tvm_ffi", "lock": "apache-tvm-ffi<0.2"}]
        },
    },
    "backends": {
        "cuda": {
            "helper": {"python": [{"pkg": "helper-lib"}]},
            "dsl": {"python": [{"pkg": "dsl", "lock": ["dsl==4.6.1", "dsl==4.5.0"]}]},
            "dsl-missing": {"python": [{"pkg": "dsl", "lock": ["dsl==4.6.1", "dsl==3.0"]}]},
        },
        "xpu": {"absent": {"python": [{"pkg": "not-on-the-index"}]}},
    },
}


@pytest.fixture
def index() -> Iterator[str]:
    with serve_index(PACKAGES) as url:
        yield url


def test_python_depends_are_locked_with_what_they_require(index: str) -> None:
    locked = lock_python_depends(Resolver(index, print), TABLE, ["cp311"], print)
    names = locked["x86_64-linux"]["cp311"]
    # The final release, not the newer pre-release.
    assert names["einops"] == {"wheels": ["einops-0.8.2-py3-none-any.whl"]}
    # The release the table's `lock` allows, and what it requires for this Python;
    # no extra, no older Python's.
    assert names["tvm-ffi"] == {
        "wheels": [
            f"apache_tvm_ffi-0.1.15-{LINUX_X86}.whl",
            "typing_extensions-4.16.0-py3-none-any.whl",
        ]
    }
    # A cp36-abi3 wheel runs on cp311; its requirement of Torch is not followed.
    assert names["helper"] == {"wheels": ["helper_lib-7.2.2-cp36-abi3-manylinux_2_28_x86_64.whl"]}
    assert names["absent"]["missing"].startswith(
        "no wheel of not-on-the-index for cp311 x86_64-linux on PyPI"
    )
    assert names["absent"]["missing"].endswith("run `kernelnix lock-wheels` to lock it anew")


def test_a_list_of_lock_requirements_locks_each_release(index: str) -> None:
    locked = lock_python_depends(Resolver(index, print), TABLE, ["cp311"], print)
    names = locked["x86_64-linux"]["cp311"]
    # Each release with what it requires, the first in `wheels`; not the newest.
    assert names["dsl"] == {
        "wheels": ["dsl-4.6.1-py3-none-any.whl", "dsl_libs-4.6.1-py3-none-any.whl"],
        "alternatives": [["dsl-4.5.0-py3-none-any.whl"]],
    }
    # A release the index lacks leaves the name unlocked, saying which.
    assert names["dsl-missing"]["missing"].startswith("no wheel of dsl==3.0 for cp311")


def url_of(index: str, project: str) -> str:
    filename = PACKAGES[project][0][0]
    return index.replace("/simple/{name}/", f"/files/{filename}")


def test_what_torch_and_the_loader_require_is_read_from_their_wheels(index: str) -> None:
    torch = PACKAGES["torch"][0][0]
    entry = {"torch": "2.13.0+cu130", "wheels": [torch], "toolkit": []}
    host: dict[str, Any] = {
        "wheels": {torch: {"url": url_of(index, "torch")}},
        "environments": {"x86_64-linux": {"cp311": {"2.13-cpu": entry, "2.13-cuda-13": entry}}},
    }
    loader = {"0.17.2": {"x86_64-linux": {"url": url_of(index, "kernels")}}}
    imports = load_time_imports(Resolver(index, print), host, loader)
    assert imports["loader"] == {
        "kernels": "0.17.2",
        # typing-extensions only below Python 3.11: not what every Python gets.
        "requires": {"packaging": ["packaging"], "pyyaml": ["_yaml", "yaml"]},
    }
    by_key = imports["torch"]["x86_64-linux"]
    # The CUDA wheel stands for the CPU build: without what only CUDA builds require.
    assert by_key["2.13-cpu"] == {"torch": "2.13.0+cu130", "requires": {"jinja2": ["jinja2"]}}
    assert by_key["2.13-cuda-13"]["requires"] == {
        "jinja2": ["jinja2"],
        "nvidia-cudnn-cu13": [],
        "triton": ["triton"],
    }


def test_the_cuda_flavor_is_what_torch_s_cuda_wheel_adds_to_its_cpu_wheel() -> None:
    """The build Python's Torch is a CPU build; the lock holds the CUDA wheel of the
    same release (read remotely from PyPI): their requirements differ by exactly
    what is_cuda_flavor names."""
    cpu = version("torch")
    assert cpu.endswith("+cpu"), cpu
    release = cpu.partition("+")[0]
    host = json.loads(LOCK.read_text())["host"]
    key = f"{'.'.join(release.split('.')[:2])}-cuda-13"
    entry = host["environments"]["x86_64-linux"]["cp311"][key]
    cuda = requires_dist(host["wheels"][entry["wheels"][0]]["url"])
    kept = [line for line in cuda if not is_cuda_flavor(Requirement(line).name)]
    assert sorted(kept) == sorted(requires("torch") or [])
