"""kernelnix.host.hermetic_wheels: the wheel lock's `torch` and `python` parts,
and `kernelnix lock-wheels`, against package indexes made of local files."""

from __future__ import annotations

import hashlib
import io
import json
import re
import zipfile
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from paths import ROOT

from kernelnix.commands.lock import lock_wheels
from kernelnix.host import hermetic_wheels as wheels

LOCK = ROOT / "kernelnix" / "data" / "wheel-lock.json"


def needed_keys() -> list[dict[str, str]]:
    return [
        {"release": w.release, "system": w.system, "flavor": w.flavor, "python": w.python}
        for w in wheels.needed_torch_wheels()
    ]


def test_lock_file_entries_are_well_formed() -> None:
    lock = json.loads(LOCK.read_text())
    needed = {(k["release"], k["system"], k["flavor"]) for k in needed_keys()}
    for release, systems in lock["torch"].items():
        for system, flavors in systems.items():
            for flavor, entry in flavors.items():
                assert (release, system, flavor) in needed
                assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", entry["hash"])
                assert entry["url"].startswith("https://") and entry["python"] == "cp313"
    assert lock["python"]["kernels"]["0.17.2"]["x86_64-linux"]["dependencies"]


def test_fill_and_needed_wheels() -> None:
    assert wheels.fill("cu{major}{minor}", "12.6") == "cu126"
    assert wheels.fill("cu{major}{minor}", "13.0") == "cu130"
    assert wheels.fill("rocm{major}.{minor}", "7.1") == "rocm7.1"
    assert wheels.fill("xpuPackages_{major}_{minor}_{patch}", "2025.3.2") == "xpuPackages_2025_3_2"
    assert wheels.fill("p_{patch}", "7") == "p_0"
    keys = wheels.needed_torch_wheels()
    assert len(keys) == len(set(keys))
    assert wheels.TorchWheel("2.13.0", "x86_64-linux", "cu126", "cp313") in keys
    assert not [k for k in keys if k.system == "aarch64-darwin"]


def make_wheel(path: Path, files: dict[str, str]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def index_page(directory: Path, links: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    anchors = "\n".join(
        f'<a href="{href}">{href.split("#")[0].split("/")[-1]}</a>' for href in links
    )
    (directory / "index.html").write_text(f"<html><body>\n{anchors}\n</body></html>\n")


TINY_MATRIX: dict[str, Any] = {
    "build-sets": [
        {"torch": "2.13", "backend": "cpu", "systems": ["x86_64-linux"]},
        {"torch": "2.13", "backend": "cuda", "version": "12.6", "systems": ["x86_64-linux"]},
        {"torch": "2.13", "backend": "cuda", "version": "13.0", "systems": ["x86_64-linux"]},
        {"torch": "2.13", "backend": "metal", "systems": ["aarch64-darwin"]},
    ],
    "hermetic": {
        "systems": ["x86_64-linux"],
        "python": {"wheel-tag": "cp313"},
        "torch-releases": {"2.13": "2.13.0"},
        "torch-wheels": {
            "flavor": {"cpu": "cpu", "cuda": "cu{major}{minor}"},
            "indexes": [],
            "platforms": {"x86_64-linux": "x86_64"},
        },
        "python-wheels": {"kernels": "0.17.2"},
    },
}


@pytest.fixture
def indexes(tmp_path: Path) -> dict[str, str]:
    """download.pytorch.org and PyPI as local files (file:// URLs)."""
    wheels.read_index.cache_clear()
    wheels.torch_build_version.cache_clear()
    root = tmp_path / "index"
    version = "__version__ = '{}'\n"
    # download.pytorch.org: a cu126 wheel (hash published) and one for another Python.
    cu126 = "torch-2.13.0%2Bcu126-cp313-cp313-manylinux_2_28_x86_64.whl"
    sha = make_wheel(root / "files" / cu126.replace("%2B", "+"), {"torch/version.py": ""})
    index_page(
        root / "whl" / "cu126" / "torch",
        [
            f"../../../files/{cu126}#sha256={sha}",
            "../../../files/torch-2.13.0%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=00",
        ],
    )
    # PyPI: untagged wheels; only torch/version.py says which build they are.
    make_wheel(
        root / "pypi-files" / "torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl",
        {"torch/version.py": version.format("2.13.0+cu130")},
    )
    make_wheel(
        root / "pypi-files" / "torch-2.13.0-cp313-cp313-musllinux_1_2_x86_64.whl",
        {"torch/version.py": version.format("2.13.0+cpu")},
    )
    index_page(
        root / "pypi" / "torch",
        [
            "../../pypi-files/torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl",
            "../../pypi-files/torch-2.13.0-cp313-cp313-musllinux_1_2_x86_64.whl",
        ],
    )
    metadata = (
        "Name: kernels\nVersion: 0.17.2\nRequires-Dist: huggingface_hub>=0.26\n"
        "Requires-Dist: PyYAML>=6\nRequires-Dist: tomli; python_version < '3.11'\n"
    )
    kernels = "kernels-0.17.2-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    make_wheel(root / "pypi-files" / kernels, {"kernels-0.17.2.dist-info/METADATA": metadata})
    index_page(root / "pypi" / "kernels", [f"../../pypi-files/{kernels}"])
    base = root.as_uri()
    return {
        "pytorch": base + "/whl/{flavor}/torch/index.html",
        "pypi-torch": base + "/pypi/torch/index.html",
        "pypi": base + "/pypi/{name}/index.html",
    }


def test_lock_finds_tagged_and_verified_untagged_wheels(
    tmp_path: Path, indexes: dict[str, str]
) -> None:
    lock_path = tmp_path / "lock.json"
    result = wheels.lock(
        path=lock_path,
        indexes=[indexes["pytorch"], indexes["pypi-torch"]],
        pypi=indexes["pypi"],
        matrix=TINY_MATRIX,
        log=lambda line: None,
    )
    assert result.missing == ["torch 2.13.0 cpu cp313 x86_64-linux"]
    lock = json.loads(lock_path.read_text())
    torch = lock["torch"]["2.13.0"]["x86_64-linux"]
    assert set(torch) == {"cu126", "cu130"}
    cu126 = tmp_path / "index/files/torch-2.13.0+cu126-cp313-cp313-manylinux_2_28_x86_64.whl"
    assert torch["cu126"]["hash"] == wheels.sri(hashlib.sha256(cu126.read_bytes()).hexdigest())
    assert torch["cu126"]["url"].endswith(
        "torch-2.13.0%2Bcu126-cp313-cp313-manylinux_2_28_x86_64.whl"
    )
    # No hash in the index: the file is hashed; the build is checked (cu130, not cpu).
    cu130 = tmp_path / "index/pypi-files/torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl"
    assert torch["cu130"]["hash"] == wheels.sri(hashlib.sha256(cu130.read_bytes()).hexdigest())
    assert "torch/version.py: 2.13.0+cu130" in torch["cu130"]["source"]
    kernels = lock["python"]["kernels"]["0.17.2"]["x86_64-linux"]
    assert kernels["dependencies"] == ["huggingface-hub", "pyyaml"]
    assert kernels["url"].endswith("manylinux2014_x86_64.whl")


def test_lock_keeps_locked_wheels_and_drops_unneeded_ones(
    tmp_path: Path, indexes: dict[str, str]
) -> None:
    lock_path = tmp_path / "lock.json"
    args: dict[str, Any] = {"matrix": TINY_MATRIX, "log": lambda line: None}
    wheels.lock(
        path=lock_path,
        indexes=[indexes["pytorch"], indexes["pypi-torch"]],
        pypi=indexes["pypi"],
        **args,
    )
    first = json.loads(lock_path.read_text())
    first["torch"]["2.12.0"] = {
        "x86_64-linux": {"cpu": {"url": "x", "hash": "y", "python": "cp313"}}
    }
    lock_path.write_text(json.dumps(first))
    # Nothing reachable now: what was locked is kept, the stale entry dropped.
    gone = "file:///nonexistent/{flavor}/"
    result = wheels.lock(path=lock_path, indexes=[gone], pypi="file:///nonexistent/{name}/", **args)
    again = json.loads(lock_path.read_text())
    assert again["torch"] == {"2.13.0": first["torch"]["2.13.0"]}
    assert sorted(result.kept) == sorted(
        [
            "torch 2.13.0 cu126 cp313 x86_64-linux",
            "torch 2.13.0 cu130 cp313 x86_64-linux",
            "kernels 0.17.2 x86_64-linux",
        ]
    )
    assert result.missing == ["torch 2.13.0 cpu cp313 x86_64-linux"]


def test_lock_wheels_command_reports_what_it_cannot_find(
    tmp_path: Path, indexes: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wheels, "matrix_data", lambda: TINY_MATRIX)
    lock_path = tmp_path / "lock.json"
    result = CliRunner().invoke(
        lock_wheels,
        [
            "--index",
            indexes["pytorch"],
            "--index",
            indexes["pypi-torch"],
            "--pypi",
            indexes["pypi"],
            "--lock-file",
            str(lock_path),
        ],
    )
    assert result.exit_code == 1, result.output
    assert "locked torch 2.13.0 cu126 cp313 x86_64-linux" in result.output
    assert "not found: torch 2.13.0 cpu cp313 x86_64-linux" in result.output
    assert lock_path.exists()
    # The python-depends are looked up on the same index, which has none of them;
    # with a lock file of its own, kernelnix's python-imports.json is not touched.
    assert (
        "not found: python-depends einops cp311 x86_64-linux: cannot read its index page"
        in result.output
    )
    assert not (tmp_path / "python-imports.json").exists()
