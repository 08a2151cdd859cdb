"""The opt-in compiler cache of Nix builds, measured: ccache's counters, and the
sandbox paths a host-toolchain build with the cache needs (tests/e2e/test_compiler_cache.py,
benchmarks/bench_incremental.py)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from nix_projects import nix


def ccache_stats(cache: Path) -> dict[str, int]:
    done = subprocess.run(
        ["ccache", "--print-stats"],
        env={**os.environ, "CCACHE_DIR": str(cache)},
        capture_output=True,
        text=True,
        check=True,
    )
    pairs = (line.split("\t") for line in done.stdout.splitlines())
    return {key: int(value) for key, value in pairs if value.isdigit()}


def counts(before: dict[str, int], after: dict[str, int]) -> tuple[int, int]:
    """(compiles that missed, compiles served from the cache) between two stats."""
    hits = sum(
        after.get(k, 0) - before.get(k, 0) for k in ("direct_cache_hit", "preprocessed_cache_hit")
    )
    return after.get("cache_miss", 0) - before.get("cache_miss", 0), hits


def sandbox_paths(python: Path, cache: Path) -> str:
    """What a sandboxed host build reads: the system, the CUDA venv and its base
    Python, the cache."""
    found = subprocess.run(
        [python, "-c", "import sys; print(sys.prefix); print(sys.base_prefix)"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    dirs = {"/bin", "/usr", "/lib", "/lib64", "/etc", *found, *map(os.path.realpath, found)}
    return " ".join([*sorted(d for d in dirs if Path(d).exists()), str(cache)])


def build_with_cache(
    project: Path, env: dict[str, str], attr: str, cache: Path, python: Path
) -> tuple[int, int]:
    """`nix build .#attr` with the compiler cache `cache` (KERNELNIX_COMPILER_CACHE,
    `--impure`) and the sandbox on, the cache in extra-sandbox-paths; returns
    (compiles that missed, compiles served from the cache)."""
    before = ccache_stats(cache)
    nix(
        project,
        {**env, "KERNELNIX_COMPILER_CACHE": str(cache)},
        "build", f".#{attr}", "--no-link", "--impure",
        "--option", "sandbox", "true",
        "--option", "extra-sandbox-paths", sandbox_paths(python, cache),
    )  # fmt: skip
    return counts(before, ccache_stats(cache))
