"""The glibc target's faults, each one error with its fix and nothing half-made:
a lock without a target for the system, a download that is not the locked file,
a file that is not a wheel, and a ziglang wheel for another machine. (Its real
assembly and use: tests/compile/test_glibc_target.py.)"""

from __future__ import annotations

import base64
import hashlib
import os
from pathlib import Path

import pytest

from kernelnix.core.diagnostics import UserError
from kernelnix.host import glibc_target
from kernelnix.host.environments import (
    GLIBC_TARGET_KEY,
    LockedGlibcTarget,
    LockedWheel,
    locked_glibc_target,
    materialize_glibc_target,
)

WHEEL = "ziglang-0.17.0-py3-none-manylinux_2_12_x86_64.whl"


def _sri(data: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def _target(tmp_path: Path, data: bytes, locked: bytes | None = None) -> LockedGlibcTarget:
    """A target whose wheel is `data`, served as a file:// URL; locked as `locked`."""
    served = tmp_path / "served" / WHEEL
    served.parent.mkdir()
    served.write_bytes(data)
    wheel = LockedWheel(WHEEL, served.as_uri(), _sri(data if locked is None else locked))
    return LockedGlibcTarget("x86_64-linux", "2.27", wheel)


def _text(error: UserError) -> str:
    return "\n".join(f"{d.message} fix: {d.fix}" for d in error.diagnostics)


def _leftovers(cache: Path) -> list[str]:
    """What the cache holds besides empty directories."""
    return sorted(str(p.relative_to(cache)) for p in cache.rglob("*") if not p.is_dir())


def test_a_system_the_lock_has_no_target_for_names_the_fix() -> None:
    lock = {"wheels": {}, GLIBC_TARGET_KEY: {"x86_64-linux": {"glibc": "2.27", "wheel": WHEEL}}}
    with pytest.raises(UserError) as raised:
        locked_glibc_target("aarch64-linux", lock)
    text = _text(raised.value)
    assert "no glibc target for aarch64-linux" in text
    assert "kernelnix lock-wheels" in text and "--host-glibc" in text


def test_a_download_that_is_not_the_locked_file_is_removed(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target = _target(tmp_path, b"not what was locked", locked=b"the locked file")
    with pytest.raises(UserError) as raised:
        materialize_glibc_target(target, cache, log=lambda line: None)
    text = _text(raised.value)
    assert "has sha256" in text and "the download was removed" in text
    assert _leftovers(cache) == []


def test_a_file_that_is_not_a_wheel_is_removed_and_nothing_is_assembled(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target = _target(tmp_path, b"a corrupt wheel: not a zip file")
    with pytest.raises(UserError) as raised:
        materialize_glibc_target(target, cache, log=lambda line: None)
    text = _text(raised.value)
    assert "is not a wheel (a zip file)" in text and "the file was removed" in text
    assert not Path(text.split(":")[0]).exists()  # the cache's file, or the store path
    assert _leftovers(cache) == []


def _zig_tree(root: Path, machine: int) -> Path:
    """An unpacked ziglang wheel whose `zig` is an ELF program for `machine`, with
    ABI lists naming glibc 2.27 and 2.28."""
    zig = root / "ziglang" / "zig"
    (zig.parent / "lib" / "libc" / "glibc").mkdir(parents=True)
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + (3).to_bytes(2, "little")
    zig.write_bytes(header + machine.to_bytes(2, "little") + bytes(44))
    os.chmod(zig, 0o755)
    abilists = b"\x01c\x00\x02" + bytes([2, 27, 0, 2, 28, 0]) + b"\x00"
    (zig.parent / "lib" / "libc" / "glibc" / "abilists").write_bytes(abilists)
    return root


def test_a_ziglang_wheel_for_another_machine_is_one_error(tmp_path: Path) -> None:
    tree = _zig_tree(tmp_path / "aarch64-zig", machine=183)
    dest = tmp_path / "targets" / "glibc-2.27"
    dest.parent.mkdir()
    with pytest.raises(glibc_target.TargetError) as raised:
        glibc_target.assemble(tree, dest, "2.27", "x86_64")
    assert "the ziglang wheel is not one for this machine" in str(raised.value)
    assert list(dest.parent.iterdir()) == []  # no half-made sysroot


def test_a_release_the_wheel_does_not_know_is_refused(tmp_path: Path) -> None:
    tree = _zig_tree(tmp_path / "zig", machine=62)
    with pytest.raises(glibc_target.TargetError, match=r"knows glibc 2\.27 to 2\.28, not 2\.17"):
        glibc_target.assemble(tree, tmp_path / "target", "2.17", "x86_64")


def test_stubs_of_another_architecture_are_refused(tmp_path: Path) -> None:
    stub = tmp_path / "libc.so.6"
    header = b"\x7fELF\x02\x01\x01" + bytes(9) + (3).to_bytes(2, "little")
    stub.write_bytes(header + (183).to_bytes(2, "little") + bytes(44))
    with pytest.raises(glibc_target.TargetError, match="for another system"):
        glibc_target.check_machine(stub, "x86_64")
