"""Redistributable builds link the C++ runtime the way docs/libstdcxx.md chose:
a static libstdc++ kept private, libgcc's helpers from libgcc.a and the unwinder
of the process's libgcc_s.so.1. The real build step compiles examples/relu's CPU
variant with --redistributable on this machine; its post-build checks then
apply the default policy, which this machine's glibc 2.36 (built into its static
libstdc++) fails, and nothing else: the link itself passes."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from handmade import plan_here
from paths import EXAMPLES

from kernelnix.checks.binaries import LIBSTDCXX_MARKERS
from kernelnix.checks.elf import read_elf
from kernelnix.compile import BuildError
from kernelnix.compile.variant import build_variant
from kernelnix.host.machine import why_not_buildable
from kernelnix.host.system import current_system

pytestmark = pytest.mark.slow


def test_redistributable_build_keeps_its_cxx_runtime_private(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", source, ignore=shutil.ignore_patterns("build", "result"))
    plan = plan_here(source)
    system = current_system()
    name = next(
        n
        for n, v in plan.variants[system].items()
        if v.backend == "cpu" and why_not_buildable(v) is None
    )
    work = tmp_path / "work"
    with pytest.raises(BuildError):
        build_variant(
            plan, system, name, source, tmp_path / "out", redistributable=True, work_dir=work
        )
    report = capsys.readouterr().out
    assert "policy kernel" in report
    assert "cxx-runtime" not in report and "libstdc++.so.6" not in report
    refused = {line.split()[0] for line in report.splitlines() if "GLIBC_2." in line}
    assert refused, report  # the host glibc is newer than the policy's 2.27
    (library,) = (work / "build").glob("*.abi3.so")
    elf = read_elf(library)
    assert "libstdc++.so.6" not in elf.needed
    assert "libgcc_s.so.1" in elf.needed
    assert "_Unwind_Resume" in elf.undefined  # the process's unwinder
    assert elf.imports.exports(LIBSTDCXX_MARKERS) == []
    gcc = {v for v in elf.undefined.values() if v and v.startswith("GCC_")}
    assert gcc <= {"GCC_3.0", "GCC_3.3", "GCC_4.2.0"}, gcc
    assert not (tmp_path / "out" / name).exists()  # a refused variant is not staged
