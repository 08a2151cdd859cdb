"""The opt-in compiler cache of Nix builds, measured: which sources a build compiled
and which ccache served (from ccache's log, which the cache directory's ccache.conf
turns on, so the sandboxed builds write it too), and the sandbox paths a
host-toolchain build with the cache needs (tests/e2e/test_compiler_cache.py,
benchmarks/bench_incremental.py)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from nix_projects import nix

LOG = "ccache.log"
_LINE = re.compile(r"^\[\S+ (\d+) *\] (Source file|Result): (.*)$")


def new_cache(directory: Path) -> Path:
    """An empty compiler cache that logs every compile."""
    directory.mkdir()
    (directory / "ccache.conf").write_text(f"log_file = {directory / LOG}\n")
    return directory


def compiles(cache: Path, since: int) -> tuple[list[str], list[str]]:
    """(sources compiled, sources served from the cache) in the log after byte `since`;
    a source's path is kept from its kernel directory on (`fused_scale_cuda/x.cu`)."""
    text = (cache / LOG).read_text()[since:]
    source: dict[str, str] = {}
    missed: set[str] = set()
    for match in filter(None, map(_LINE.match, text.splitlines())):
        pid, kind, value = match.groups()
        if kind == "Source file":
            source[pid] = value.split("/kernel/")[-1]
        elif value == "cache_miss":
            missed.add(pid)
    return (
        sorted(s for p, s in source.items() if p in missed),
        sorted(s for p, s in source.items() if p not in missed),
    )


def python_prefixes(python: Path | str) -> list[str]:
    """`sys.prefix` and `sys.base_prefix` of `python`: its installation and, for a
    virtual environment, its base's, which a sandboxed host build must see."""
    return subprocess.run(
        [python, "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()


def sandbox_paths(python: Path, cache: Path) -> str:
    """What a sandboxed host build reads: the system, the CUDA venv and its base
    Python, the cache."""
    found = python_prefixes(python)
    dirs = {"/bin", "/usr", "/lib", "/lib64", "/etc", *found, *map(os.path.realpath, found)}
    return " ".join([*sorted(d for d in dirs if Path(d).exists()), str(cache)])


def build_with_cache(
    project: Path, env: dict[str, str], attr: str, cache: Path, python: Path
) -> tuple[list[str], list[str]]:
    """`nix build .#attr` with the compiler cache `cache` (KERNELNIX_COMPILER_CACHE,
    `--impure`) and the sandbox on, the cache in extra-sandbox-paths; returns the
    sources it compiled and those the cache served."""
    log = cache / LOG
    since = log.stat().st_size if log.exists() else 0
    nix(
        project,
        {**env, "KERNELNIX_COMPILER_CACHE": str(cache)},
        "build", f".#{attr}", "--no-link", "--impure",
        "--option", "sandbox", "true",
        "--option", "extra-sandbox-paths", sandbox_paths(python, cache),
    )  # fmt: skip
    return compiles(cache, since)
