"""Kernel projects built with real Nix: shared by the tests of tests/e2e/ and the
benchmarks that build with Nix (bench_nix, bench_scaling, bench_wheels, bench_incremental).

Flakes see only what git tracks, so kernelnix itself is used through a
committed copy of this working tree (`git+file://`), and each kernel project
is a copy of an example with its generated files, in a fresh git repository.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Collection
from pathlib import Path

from paths import EXAMPLE_COPY_IGNORE, ROOT
from wheel_locks import lock_with

GIT_IDENTITY = ["-c", "user.name=kernelnix-tests", "-c", "user.email=tests@kernelnix.invalid"]


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *GIT_IDENTITY, *args], cwd=cwd, check=True, capture_output=True, text=True
    ).stdout


def clone_worktree(dest: Path, build_sets: Collection[str] = ()) -> str:
    """Commit a copy of this working tree (tracked and untracked, not ignored) into `dest`,
    whose wheel lock has host environments for `build_sets` only (tests/support/wheel_locks.py)."""
    listed = git(ROOT, "ls-files", "-z", "--cached", "--others", "--exclude-standard")
    for name in filter(None, listed.split("\0")):
        source = ROOT / name
        if source.is_file():
            target = dest / name
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source, target)
    lock_with(dest / "kernelnix" / "data" / "wheel-lock.json", build_sets)
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    git(dest, "commit", "-q", "-m", "kernelnix under test")
    return f"git+file://{dest}"


def kernelnix_clone(work: Path, build_sets: Collection[str] = ()) -> tuple[str, dict[str, str]]:
    """A committed clone of this kernelnix in `work/kernelnix` whose wheel lock keeps
    `build_sets` only, and the environment that builds with it: Nix's registry maps
    the clone, and KERNELNIX_WHEEL_LOCK names the same lock for kernelnix's Python."""
    url = clone_worktree(work / "kernelnix", build_sets)
    env = nix_environment(work / "registry.json", url)
    env["KERNELNIX_WHEEL_LOCK"] = str(lock_with(work / "lock.json", build_sets))
    return url, env


def nix_environment(registry: Path, kernelnix_url: str) -> dict[str, str]:
    """os.environ plus an offline Nix configuration whose registry maps `kernelnix`."""
    path = kernelnix_url.removeprefix("git+file://")
    registry.write_text(
        json.dumps(
            {
                "version": 2,
                "flakes": [
                    {
                        "from": {"type": "indirect", "id": "kernelnix"},
                        "to": {"type": "git", "url": f"file://{path}"},
                    }
                ],
            }
        )
    )
    config = {
        "experimental-features": "nix-command flakes",
        "substituters": "",
        "flake-registry": str(registry),
        "build-users-group": "",
        "sandbox": "false",
        "warn-dirty": "false",
    }
    env = dict(os.environ)
    env["NIX_CONFIG"] = "\n".join(f"{k} = {v}" for k, v in config.items())
    env["HF_HUB_OFFLINE"] = "1"
    return env


def make_project(
    example: Path,
    dest: Path,
    kernelnix_url: str,
    env: dict[str, str],
    generate_options: tuple[str, ...] = (),
) -> Path:
    """A copy of `example` with its generated files, staged in a fresh git repository.

    Its flake builds with the host toolchain unless `generate_options` name one: the
    Nix library's tests share the host's builds with `build --local`; the hermetic
    default has tests of its own (test_hermetic.py, test_kernel_builder_flakes.py)."""
    shutil.copytree(example, dest, ignore=EXAMPLE_COPY_IGNORE)
    toolchain = () if "--toolchain" in generate_options else ("--toolchain", "host")
    subprocess.run(
        [
            "kernelnix",
            "generate",
            str(dest),
            "--kernelnix-url",
            kernelnix_url,
            *toolchain,
            *generate_options,
        ],
        check=True,
        capture_output=True,
        env=env,
    )
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    return dest


def nix(
    cwd: Path, env: dict[str, str], *args: str, check: bool = True
) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(["nix", *args], cwd=cwd, env=env, capture_output=True, text=True)
    if check and done.returncode != 0:
        raise AssertionError(f"nix {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
    return done


# The input line of kernel-builder's flakes (kernels-community's among them).
UPSTREAM_INPUT = 'kernel-builder.url = "github:huggingface/kernels";'


# kernelnix's flake whose default toolchain is the host's (nix/flakes/host).
HOST_FLAKE_DIR = "nix/flakes/host"


def kernel_builder_project(
    source: Path, dest: Path, kernelnix_url: str, *, host: bool = True
) -> Path:
    """A copy of a kernel with kernel-builder's flake.nix, its input URL (only)
    pointing at kernelnix, staged in a fresh git repository. With `host`, the URL is
    that of nix/flakes/host: the flake builds with the host toolchain, which the
    Nix library's tests share with `build --local`; without, with the default
    (hermetic) toolchain."""
    if host:
        kernelnix_url += ("&" if "?" in kernelnix_url else "?") + f"dir={HOST_FLAKE_DIR}"
    shutil.copytree(source, dest, ignore=shutil.ignore_patterns("build", "result", "__pycache__"))
    flake = dest / "flake.nix"
    text = flake.read_text()
    assert text.count(UPSTREAM_INPUT) == 1, f"{source.name}: not kernel-builder's input line"
    flake.write_text(
        text.replace(UPSTREAM_INPUT, f"kernel-builder.url = {json.dumps(kernelnix_url)};")
    )
    git(dest, "init", "-q")
    git(dest, "add", "-A")
    return dest
