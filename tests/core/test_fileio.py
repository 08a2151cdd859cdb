"""kernelnix.core.fileio: whole files and directories, and the clean-up of what
killed writers left (tests/e2e/test_interruption.py kills real commands)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from kernelnix.core.fileio import replacing_dir, write_atomic


def dead_pid() -> int:
    """The id of a process that has ended."""
    process = subprocess.Popen([sys.executable, "-c", "pass"])
    process.wait()
    return process.pid


def test_a_write_removes_the_temporaries_of_dead_writers_only(tmp_path: Path) -> None:
    target = tmp_path / "plan.json"
    dead = tmp_path / f".plan.json.{dead_pid()}.abc_123.tmp"
    alive = tmp_path / f".plan.json.{os.getpid()}.def456.tmp"
    other = tmp_path / f".plan.json.5.{dead_pid()}.ghi789.tmp"  # a temporary of "plan.json.5"
    for path in (dead, alive, other):
        path.write_text("partial")
    write_atomic(target, "whole\n")
    assert target.read_text() == "whole\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(
        [target.name, alive.name, other.name]
    )


def test_replacing_dir_swaps_in_the_new_directory(tmp_path: Path) -> None:
    destination = tmp_path / "variant"
    destination.mkdir()
    (destination / "old.txt").write_text("old")
    leftover = tmp_path / f".variant.{dead_pid()}.xyz.tmp"
    (leftover / "variant").mkdir(parents=True)
    with replacing_dir(destination) as staged:
        staged.mkdir()
        (staged / "new.txt").write_text("new")
        assert (destination / "old.txt").is_file()
    assert [p.name for p in destination.iterdir()] == ["new.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["variant"]


def test_replacing_dir_keeps_the_old_directory_when_the_block_fails(tmp_path: Path) -> None:
    destination = tmp_path / "variant"
    destination.mkdir()
    (destination / "old.txt").write_text("old")
    with pytest.raises(RuntimeError), replacing_dir(destination) as staged:
        staged.mkdir()
        (staged / "half.txt").write_text("half")
        raise RuntimeError("the build failed")
    assert [p.name for p in destination.iterdir()] == ["old.txt"]
    assert [p.name for p in tmp_path.iterdir()] == ["variant"]
