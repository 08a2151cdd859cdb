"""Killed midway, `generate`, `update-build` and `build --local` leave every
output whole.

Each command runs as a subprocess and gets SIGKILL (its whole process group,
compilers included) at several points: delays spread over an uninterrupted
run, just before a rename (os.replace patched to kill), while a fake slow
compiler runs, while the variant directory is staged. Afterwards every output
is its old content or its complete new content, a variant directory is whole
or absent, and the only leftovers are temporaries named as kernelnix.core.fileio
names them, which the next run removes.
"""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from nix_projects import git
from paths import EXAMPLES

TEMPORARY = re.compile(r"\..+\.\d+\.[a-z0-9_]+\.tmp")
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
KILLED_AT_RENAME = (
    "import os, signal, sys\n"
    "from kernelnix.cli import main\n"
    "os.replace = lambda *args: os.kill(os.getpid(), signal.SIGKILL)\n"
    "main(sys.argv[1:], prog_name='kernelnix')\n"
)

Tree = dict[str, bytes]  # a directory: relative path -> content


def start(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """`args` in a new process group, so that a kill reaches its children too."""
    return subprocess.Popen(
        args,
        cwd=cwd,
        env=env,
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )


def kill(process: subprocess.Popen[bytes]) -> None:
    with contextlib.suppress(ProcessLookupError):  # the group is gone already
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def kill_when(
    process: subprocess.Popen[bytes], ready: Callable[[], bool], timeout: float = 120
) -> None:
    """SIGKILL the process group as soon as `ready()` holds (polled every 2 ms)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert process.poll() is None, "the command ended before the point to kill it at"
        assert time.monotonic() < deadline, "the point to kill at never came"
        time.sleep(0.002)
    kill(process)


def run_to_end(args: list[str], cwd: Path, env: dict[str, str] | None = None) -> float:
    """Run `args` uninterrupted; how long it took."""
    began = time.monotonic()
    done = subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    return time.monotonic() - began


def kill_after(args: list[str], cwd: Path, delay: float, env: dict[str, str] | None = None) -> None:
    process = start(args, cwd, env)
    try:
        process.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        kill(process)


def delays(duration: float, count: int) -> list[float]:
    """`count` delays spread over a run of `duration` seconds, the last at its very end."""
    return [duration * (index + 1) / count for index in range(count)]


def snapshot(paths: list[Path]) -> dict[Path, bytes | None]:
    """The content of each path, None where it does not exist."""
    return {path: path.read_bytes() if path.exists() else None for path in paths}


def restore(state: dict[Path, bytes | None]) -> None:
    for path, content in state.items():
        if content is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(content)


def files(root: Path) -> set[Path]:
    return {path for path in root.rglob("*") if path.is_file()}


def temporaries(root: Path) -> list[Path]:
    return [path for path in root.rglob(".*") if TEMPORARY.fullmatch(path.name)]


def assert_whole(
    outputs: list[Path], old: dict[Path, bytes | None], new: dict[Path, bytes | None]
) -> None:
    for path, content in snapshot(outputs).items():
        assert content in (old[path], new[path]), f"{path.name}: neither old nor new content"


# ----------------------------------------------------------- generate, update-build


def generate_case(project: Path) -> tuple[list[str], list[Path]]:
    """A generated relu whose build.toml and flake input then change."""
    shutil.copytree(EXAMPLES / "relu", project, ignore=shutil.ignore_patterns("build"))
    run_to_end(["kernelnix", "generate", "."], project)
    toml = project / "build.toml"
    toml.write_text(toml.read_text().replace("version = 1", "version = 2"))
    names = ["flake.nix", "kernelnix-plan.json", "kernelnix-host.json"]
    args = ["generate", ".", "--kernelnix-url", "git+file:///elsewhere"]
    return args, [project / name for name in names]


def update_case(project: Path) -> tuple[list[str], list[Path]]:
    """A pre-edition build.toml that update-build rewrites."""
    shutil.copytree(EXAMPLES / "relu-legacy", project, ignore=shutil.ignore_patterns("build"))
    return ["update-build", "."], [project / "build.toml"]


CASES = {"generate": generate_case, "update-build": update_case}


@pytest.mark.parametrize("case", sorted(CASES))
def test_killed_at_any_moment_outputs_stay_whole(tmp_path: Path, case: str) -> None:
    project = tmp_path / "kernel"
    args, outputs = CASES[case](project)
    before = files(project)
    old = snapshot(outputs)
    duration = run_to_end(["kernelnix", *args], project)
    new = snapshot(outputs)
    assert new != old
    for delay in delays(duration, 12):
        restore(old)
        kill_after(["kernelnix", *args], project, delay)
        assert_whole(outputs, old, new)
        assert set(temporaries(project)) == files(project) - before
    run_to_end(["kernelnix", *args], project)
    assert snapshot(outputs) == new
    assert files(project) == before


@pytest.mark.parametrize("case", sorted(CASES))
def test_killed_before_the_rename_the_next_run_cleans_up(tmp_path: Path, case: str) -> None:
    project = tmp_path / "kernel"
    args, outputs = CASES[case](project)
    before = files(project)
    old = snapshot(outputs)
    killed = start([sys.executable, "-c", KILLED_AT_RENAME, *args], project).wait()
    assert killed == -signal.SIGKILL
    assert snapshot(outputs) == old
    left = temporaries(project)
    assert len(left) == 1 and left[0].parent == project, left
    run_to_end(["kernelnix", *args], project)
    assert snapshot(outputs) != old
    assert files(project) == before


# ------------------------------------------------------------------ build --local

TINY_TOML = """\
[general]
name = "tiny"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]

[torch]
src = ["torch-ext/torch_binding.cpp"]

[kernel.tiny_cpu]
backend = "cpu"
depends = ["torch"]
src = ["tiny_cpu/tiny.cpp"]
"""
# No Torch headers: the kernel compiles in a second, where relu takes a minute.
TINY_SOURCES = {
    "build.toml": TINY_TOML,
    "torch-ext/torch_binding.cpp": (
        '#include "registration.h"\nREGISTER_EXTENSION(TORCH_EXTENSION_NAME)\n'
    ),
    "torch-ext/tiny/__init__.py": "from ._ops import ops\n",
    "tiny_cpu/tiny.cpp": "int tiny_value() { return 1; }\n",
    ".gitignore": "build/\n",
}
# A C++ compiler that, while $SLOW_MARK is set, touches that file and stalls on tiny.cpp.
SLOW_COMPILER = """\
#!/bin/sh
case "$*" in
  *tiny.cpp*) if [ -n "${SLOW_MARK:-}" ]; then touch "$SLOW_MARK"; sleep 600; fi ;;
esac
exec c++ "$@"
"""
BUILD = ["kernelnix", "build", "--local", ".", "--variant", VARIANT]


def tree(directory: Path) -> Tree:
    return {str(p.relative_to(directory)): p.read_bytes() for p in files(directory)}


@pytest.fixture
def tiny(tmp_path: Path) -> tuple[Path, dict[str, str]]:
    """The tiny kernel, committed (a stable op namespace), and an env whose C++ compiler
    is SLOW_COMPILER."""
    project = tmp_path / "tiny"
    for relative, text in TINY_SOURCES.items():
        (project / relative).parent.mkdir(parents=True, exist_ok=True)
        (project / relative).write_text(text)
    git(project, "init", "-q")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "tiny")
    compiler = tmp_path / "slow-c++"
    compiler.write_text(SLOW_COMPILER)
    compiler.chmod(0o755)
    return project, {**os.environ, "CXX": str(compiler), "HF_HUB_OFFLINE": "1"}


def assert_build_dir(build: Path, allowed: list[Tree]) -> None:
    """build/ holds the work dir, kernelnix temporaries and whole variant directories."""
    for entry in build.iterdir():
        if entry.name == ".build" or TEMPORARY.fullmatch(entry.name):
            continue
        assert (entry / "metadata.json").is_file(), f"half variant directory {entry.name}"
        assert tree(entry) in allowed, f"{entry.name} is neither the old nor the new variant"


@pytest.mark.slow
def test_build_killed_while_compiling_leaves_no_variant(tiny: tuple[Path, dict[str, str]]) -> None:
    project, env = tiny
    mark = project.parent / "compiling"
    process = start(BUILD, project, {**env, "SLOW_MARK": str(mark)})
    kill_when(process, mark.exists)
    assert [p.name for p in (project / "build").iterdir()] == [".build"]
    run_to_end(BUILD, project, env)
    assert (project / "build" / VARIANT / "metadata.json").is_file()
    assert temporaries(project) == []


@pytest.mark.slow
def test_rebuild_killed_midway_keeps_the_old_variant(tiny: tuple[Path, dict[str, str]]) -> None:
    project, env = tiny
    build, variant = project / "build", project / "build" / VARIANT
    run_to_end(BUILD, project, env)
    old = tree(variant)
    saved = project.parent / "old-variant"
    shutil.copytree(variant, saved)
    (project / "tiny_cpu" / "tiny.cpp").write_text("int tiny_value() { return 2; }\n")
    git(project, "commit", "-qam", "two")  # a new op namespace: new file names
    mark = project.parent / "compiling"
    kill_when(start(BUILD, project, {**env, "SLOW_MARK": str(mark)}), mark.exists)
    assert tree(variant) == old
    duration = run_to_end(BUILD, project, env)
    new = tree(variant)
    assert new != old

    def put_back_old() -> None:
        shutil.rmtree(variant)
        shutil.copytree(saved, variant)

    # Compiled already: each rebuild configures, installs, checks and replaces.
    for delay in delays(duration, 4):
        put_back_old()
        kill_after(BUILD, project, delay, env)
        assert_build_dir(build, [old, new])
    put_back_old()
    staged = start(BUILD, project, env)
    kill_when(staged, lambda: any(TEMPORARY.fullmatch(p.name) for p in build.iterdir()))
    assert_build_dir(build, [old])
    run_to_end(BUILD, project, env)
    assert tree(variant) == new
    assert temporaries(project) == []
