"""Source and include paths must stay inside the project; missing sources warn."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from kernelnix.cli import main
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError

BODY = """\
[general]
name = "demo"
version = 1
edition = 5
license = "MIT"
backends = ["cpu"]
[torch]
src = ["torch-ext/binding.cpp"]
include = [{include}]
[kernel.k]
backend = "cpu"
depends = ["torch"]
src = [{src}]
"""


def project(tmp_path: Path, src: str, include: str = '"."') -> Path:
    (tmp_path / "torch-ext").mkdir(exist_ok=True)
    (tmp_path / "torch-ext" / "binding.cpp").write_text("")
    (tmp_path / "k.cpp").write_text("")
    (tmp_path / "build.toml").write_text(BODY.format(src=src, include=include))
    return tmp_path


@pytest.mark.parametrize(
    ("src", "include", "key", "reason"),
    [
        ('"/etc/passwd"', '"."', "kernel.k.src[0]", "absolute paths are not allowed"),
        ('"k.cpp", "../outside.cpp"', '"."', "kernel.k.src[1]", "`..` climbs out"),
        ('"k.cpp"', '"/usr/include"', "torch.include[0]", "absolute paths are not allowed"),
        ('"k.cpp"', '"sub/../../x"', "torch.include[0]", "`..` climbs out"),
    ],
)
def test_escaping_paths_are_errors(
    tmp_path: Path, src: str, include: str, key: str, reason: str
) -> None:
    project(tmp_path, src, include)
    with pytest.raises(UserError) as info:
        load_config(tmp_path)
    [diagnostic] = info.value.diagnostics
    assert diagnostic.key == key and reason in diagnostic.message
    assert diagnostic.line is not None


def test_symlink_pointing_outside_is_an_error(tmp_path: Path) -> None:
    outside = tmp_path / "outside.cpp"
    outside.write_text("")
    root = tmp_path / "kernel"
    root.mkdir()
    os.symlink(outside, root / "link.cpp")
    project(root, '"link.cpp"')
    result = CliRunner().invoke(main, ["check-config", str(root)])
    assert result.exit_code == 2
    assert "symlink that points outside" in result.output and "kernel.k.src[0]" in result.output


def test_symlink_inside_is_fine_and_a_missing_source_fails_the_plan(tmp_path: Path) -> None:
    project(tmp_path, '"k.cpp", "alias.cpp", "gone.cpp"')
    os.symlink(tmp_path / "k.cpp", tmp_path / "alias.cpp")
    assert load_config(tmp_path).warnings == []  # check-config only judges the file
    result = CliRunner().invoke(main, ["plan", str(tmp_path), "--unique-id", "x"])
    assert result.exit_code == 2
    assert "kernel.k.src[2]" in result.output and "'gone.cpp' does not exist" in result.output
    assert not (tmp_path / "kernelnix-plan.json").exists()
