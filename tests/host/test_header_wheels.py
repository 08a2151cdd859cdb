"""kernelnix.host.header_wheels against a package index served on 127.0.0.1: each
header dependency of kernelnix/data/dependencies.json locks the newest wheel of
the major.minor it names, for every system; one whose release has no wheel is
`missing` with the releases there are, and `lock-wheels` notes it and where Nix
builds take it from instead (its GitHub release), and succeeds."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner
from package_index import serve_index, wheel

from kernelnix.commands.lock import lock_wheels
from kernelnix.host.header_wheels import lock_header_file

HEADER = {"cutlass_library/source/include/cutlass/version.h": "#define CUTLASS_MAJOR 3\n"}
PACKAGES = {
    "nvidia-cutlass": [
        wheel("nvidia-cutlass", "3.8.0.0", "py3-none-any", ["networkx"], HEADER),
        wheel("nvidia-cutlass", "3.8.1.0", "py3-none-any", ["networkx"], HEADER),
        wheel("nvidia-cutlass", "3.6.0.0", "py3-none-any", [], HEADER),
        wheel("nvidia-cutlass", "4.2.0.0", "py3-none-any", [], HEADER),
        ("nvidia_cutlass-latest-py3-none-any.whl", b"a mangled upload: no version"),
    ],
}


@pytest.fixture
def index() -> Iterator[str]:
    with serve_index(PACKAGES) as url:
        yield url


def test_each_dependency_locks_the_newest_wheel_of_its_release(tmp_path: Path, index: str) -> None:
    path = tmp_path / "lock.json"
    path.write_text(json.dumps({"torch": {"note": "kept"}}))
    notes = lock_header_file(path, index, lambda line: None)
    lock = json.loads(path.read_text())
    part = lock["host"]["header-depends"]
    assert set(part) == {"x86_64-linux", "aarch64-linux"}
    for by_key in part.values():
        assert by_key["cutlass_3_8"] == {"wheel": "nvidia_cutlass-3.8.1.0-py3-none-any.whl"}
        assert by_key["cutlass_3_6"] == {"wheel": "nvidia_cutlass-3.6.0.0-py3-none-any.whl"}
        assert by_key["cutlass_4_0"] == {
            "missing": "PyPI has no nvidia-cutlass 4.0.* wheel "
            "(it has 3.6.0.0, 3.8.0.0, 3.8.1.0, 4.2.0.0)"
        }
    # What the wheel requires is not followed: only its headers are used.
    assert sorted(lock["host"]["wheels"]) == [
        "nvidia_cutlass-3.6.0.0-py3-none-any.whl",
        "nvidia_cutlass-3.8.1.0-py3-none-any.whl",
    ]
    locked = lock["host"]["wheels"]["nvidia_cutlass-3.8.1.0-py3-none-any.whl"]
    assert locked["url"].endswith("/nvidia_cutlass-3.8.1.0-py3-none-any.whl")
    assert locked["hash"].startswith("sha256-")
    assert lock["torch"] == {"note": "kept"}
    assert (
        "header-depends cutlass_4_0: PyPI has no nvidia-cutlass 4.0.* wheel (it has 3.6.0.0, "
        "3.8.0.0, 3.8.1.0, 4.2.0.0); Nix builds fetch its release, NVIDIA/cutlass v4.0.0"
    ) in notes
    assert len(notes) == len(set(notes))


def test_lock_wheels_only_header_depends_notes_what_pypi_lacks(tmp_path: Path, index: str) -> None:
    path = tmp_path / "lock.json"
    path.write_text("{}")
    done = CliRunner().invoke(
        lock_wheels,
        ["--only", "header-depends", "--pypi", index, "--lock-file", str(path)],
    )
    assert done.exit_code == 0, done.output
    assert "note: header-depends cutlass_4_0: PyPI has no nvidia-cutlass 4.0.*" in done.output
    assert "not found" not in done.output
    assert "cutlass_3_8" not in done.output
    assert set(json.loads(path.read_text())["host"]) == {"header-depends", "wheels"}
