from __future__ import annotations

from pathlib import Path

import pytest
from kernels._rust import KernelDependency, KernelLocks, KernelVersion

from kernelnix.core.diagnostics import UserError
from kernelnix.plan.kernel_lock import LockedKernel, read_lock, render_lock, write_lock

LOCKS = [
    LockedKernel("org/c", 1, "c" * 40),
    LockedKernel("org/b", 2, "b" * 40),
    LockedKernel("org/pinned", "d" * 40, "d" * 40),
]


def test_the_loader_reads_what_is_written(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    write_lock(path, LOCKS)
    loaded = KernelLocks.from_json(path.read_text())
    assert len(loaded) == 3
    assert loaded[KernelDependency("org/b", KernelVersion.Version(2))].commit == "b" * 40
    pinned = KernelDependency("org/pinned", KernelVersion.Revision("d" * 40))
    assert loaded[pinned].commit == "d" * 40
    assert sorted(read_lock(path)) == sorted(LOCKS)


def test_the_same_tree_gives_the_same_bytes() -> None:
    assert render_lock(LOCKS) == render_lock(list(reversed(LOCKS)))


def test_a_bad_commit_is_one_error(tmp_path: Path) -> None:
    path = tmp_path / "kernels.lock"
    path.write_text(render_lock([LockedKernel("org/b", 1, "main")]))
    with pytest.raises(UserError) as info:
        read_lock(path)
    (diagnostic,) = info.value.diagnostics
    assert "40-digit" in diagnostic.message
    assert "kernelnix lock" in str(diagnostic.fix)
