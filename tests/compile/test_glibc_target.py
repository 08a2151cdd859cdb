"""Publishable Linux variants from this machine: the build step compiles and links
against the glibc 2.27 target assembled from the locked ziglang wheel
(kernelnix.host.glibc_target), with a private C++ runtime.

The kernel (data/glibc-probe) uses threads, call_once and random_device, which
Debian's static libstdc++ implements with glibc 2.32 to 2.36 symbols, and throws
C++ exceptions, which must reach Python as RuntimeError through the process's
unwinder. A kernel calling a function newer than glibc 2.27 fails with one
error naming it, whether the target's headers hide it (a compile error) or the
kernel declares it itself (a library leaving it unbound).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from handmade import plan_here

from kernelnix.checks import CheckOptions, run_checks
from kernelnix.checks.elf import read_elf
from kernelnix.cli import main
from kernelnix.compile.variant import build_variant
from kernelnix.host.environments import cache_dir, locked_glibc_target, materialize_glibc_target
from kernelnix.host.machine import why_not_buildable
from kernelnix.host.system import current_system
from kernelnix.plan.model import Plan

pytestmark = pytest.mark.slow

PROBE = Path(__file__).parent / "data" / "glibc-probe"


@pytest.fixture(scope="module")
def target() -> Path:
    """The target of this system, assembled in kernelnix's cache (once per machine)."""
    return materialize_glibc_target(locked_glibc_target(current_system()))


def _source(tmp_path: Path) -> tuple[Path, Plan, str]:
    """A copy of the probe kernel, its plan, and the CPU variant this Python's Torch builds."""
    source = tmp_path / "glibc-probe"
    shutil.copytree(PROBE, source)
    plan = plan_here(source)
    name = next(
        n
        for n, v in plan.variants[current_system()].items()
        if v.backend == "cpu" and why_not_buildable(v) is None
    )
    return source, plan, name


def test_the_target_has_glibc_2_27_stubs_and_knows_the_newer_functions(target: Path) -> None:
    described = json.loads((target / "kernelnix-glibc-target.json").read_text())
    assert described["glibc"] == "2.27"
    newer = described["newer-symbols"]
    assert (newer["close_range"], newer["pthread_cond_clockwait"]) == ("2.34", "2.30")
    assert newer["arc4random"] == "2.36"
    assert "memcpy" not in newer and "pthread_create" not in newer
    libc = target / "usr" / "lib" / described["multiarch"] / "libc.so.6"
    symbols = subprocess.run(
        ["readelf", "--dyn-syms", "--wide", str(libc)], capture_output=True, text=True, check=True
    ).stdout
    versions = {_glibc_version(v) for v in re.findall(r"@@?(GLIBC_[0-9.]+)", symbols)}
    assert max(v for v in versions if v) == (2, 27)
    assert not (target / "usr" / "include" / "sys" / "single_threaded.h").exists()


def _glibc_version(version: str) -> tuple[int, ...] | None:
    if not version.startswith("GLIBC_2."):
        return None
    return tuple(int(part) for part in version.removeprefix("GLIBC_").split("."))


def test_a_threaded_kernel_is_publishable_and_its_exceptions_reach_python(
    tmp_path: Path, target: Path
) -> None:
    source, plan, name = _source(tmp_path)
    work = tmp_path / "work"
    built = build_variant(
        plan,
        current_system(),
        name,
        source,
        tmp_path / "out",
        redistributable=True,
        work_dir=work,
        glibc_target=target,
    )
    # The build step held it to the publishing policy, and imported it; so does check.
    metadata = json.loads((built / "metadata.json").read_text())
    assert metadata["provenance"]["kernelnix"]["policy"] == "kernel"
    options = CheckOptions(policy="kernel", redistributable=True, import_check=False)
    assert run_checks(built, options).ok
    (library,) = built.glob("*.abi3.so")
    elf = read_elf(library)
    versions = [_glibc_version(v) for v in elf.undefined.values() if v]
    assert max(v for v in versions if v) <= (2, 27)
    assert "libstdc++.so.6" not in elf.needed and "libgcc_s.so.1" in elf.needed
    # Neutral paths: nothing of this machine's cache, Torch or work directory.
    data = library.read_bytes()
    for path in (cache_dir(), Path(sys.prefix), tmp_path, target):
        assert str(path).encode() not in data, path
    assert b"/kernelnix/site/torch/include/" in data  # __FILE__ of Torch's headers

    script = f"""
from pathlib import Path
import torch
from kernels import get_local_kernel
probe = get_local_kernel(Path({str(tmp_path / "out")!r}))
x = torch.arange(6.0)
assert torch.equal(probe.add_on_thread(x, 2), x + 2)
assert 0 <= probe.random_number() < 1000
for how, text in ((0, "std::runtime_error from the kernel"), (1, "TORCH_CHECK from the kernel")):
    try:
        probe.fail(how)
    except RuntimeError as error:
        assert text in str(error), error
    else:
        raise AssertionError("no exception")
probe.fail(2)
print("probe ok")
"""
    done = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={"HF_HUB_OFFLINE": "1", "PATH": "/usr/bin:/bin"},
        check=False,
    )
    assert done.returncode == 0 and "probe ok" in done.stdout, done.stderr


NEWER_CALL = """#include <cstdint>
#include <unistd.h>
int64_t random_number() { return close_range(1000, 1001, 0); }
"""
# The kernel declares the function itself: it compiles, and the link leaves it unbound.
OWN_DECLARATION = """
#include <cstdint>
extern "C" int close_range(unsigned int first, unsigned int last, int flags);
int64_t random_number() { return close_range(1000, 1001, 0); }
"""


@pytest.mark.parametrize(
    ("code", "line"), [(NEWER_CALL, "probe/newer.cpp:3: "), (OWN_DECLARATION, "probe/newer.cpp: ")]
)
def test_a_function_newer_than_glibc_2_27_is_one_clear_error(
    tmp_path: Path, target: Path, code: str, line: str
) -> None:
    source, _, name = _source(tmp_path)
    probe = (source / "probe" / "probe.cpp").read_text()
    (source / "probe" / "probe.cpp").write_text(
        probe.replace("int64_t random_number()", "int64_t unused_random_number()")
    )
    (source / "probe" / "newer.cpp").write_text(code)
    toml = source / "build.toml"
    toml.write_text(
        toml.read_text().replace('"probe/probe.cpp"]', '"probe/probe.cpp", "probe/newer.cpp"]')
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan_here(source).to_json())
    args = ["build-variant", "--plan", str(plan_file), "--variant", name]
    args += ["--source", str(source), "--out", str(tmp_path / "out"), "--redistributable"]
    result = CliRunner().invoke(main, [*args, "--glibc-target", str(target)])
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    errors = [text for text in result.output.splitlines() if text.startswith("error:")]
    assert len(errors) == 1, result.output
    assert (
        f"error: {line}close_range needs glibc 2.34, but published variants are built "
        in (errors[0])
    )
    assert "fix: use what glibc 2.27 offers instead of close_range" in result.output
    assert "--host-glibc" in result.output
    assert not (tmp_path / "out" / name).exists()


def test_host_glibc_is_a_local_build_option() -> None:
    """With Nix, the flake's hostGlibc = true says the same; the error names both."""
    result = CliRunner().invoke(main, ["build", str(PROBE), "--host-glibc"])
    assert result.exit_code == 2, result.output
    assert "--host-glibc applies to --local builds" in result.output
    assert "hostGlibc = true in flake.nix" in result.output
    assert "Traceback" not in result.output
