"""The compiler cache: a build uses ccache (or sccache) as the compiler launcher when
one is installed, and a fresh copy of the same tree, elsewhere, hits the cache."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from paths import EXAMPLES, ROOT

from kernelnix.compile.variant import compiler_launcher
from kernelnix.host.system import current_system

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache"),
]


def stats(env: dict[str, str]) -> dict[str, int]:
    """ccache's counters (machine-readable form)."""
    out = subprocess.run(
        ["ccache", "--print-stats"], capture_output=True, text=True, env=env, check=True
    ).stdout
    return {k: int(v) for k, v in (line.split("\t") for line in out.splitlines()) if v.isdigit()}


def test_a_fresh_copy_of_the_tree_hits_the_cache(tmp_path: Path) -> None:
    env = {
        **os.environ,
        "CCACHE_DIR": str(tmp_path / "cache"),
        "PYTHONPATH": str(ROOT),
        "HF_HUB_OFFLINE": "1",
    }
    env.pop("KERNELNIX_COMPILER_LAUNCHER", None)
    variant = f"torch213-cxx11-cpu-{current_system()}"
    for copy in ("first", "second"):
        project = tmp_path / copy / "relu"
        shutil.copytree(EXAMPLES / "relu", project, ignore=shutil.ignore_patterns("build"))
        done = subprocess.run(
            [sys.executable, "-m", "kernelnix", "build", "--local", str(project),
             "--variant", variant, "--no-progress"],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert "-DCMAKE_CXX_COMPILER_LAUNCHER=" in done.stdout + done.stderr
        counters = stats(env)
        if copy == "first":
            assert (
                counters.get("direct_cache_hit", 0) + counters.get("preprocessed_cache_hit", 0) == 0
            )
            assert counters["cache_miss"] >= 2  # the binding and the kernel
            misses = counters["cache_miss"]
        else:
            assert counters["cache_miss"] == misses  # nothing compiled again
            assert counters.get("direct_cache_hit", 0) >= 2


def test_the_launcher_can_be_chosen_or_turned_off(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("KERNELNIX_COMPILER_LAUNCHER", "none")
    assert compiler_launcher() is None
    monkeypatch.setenv("KERNELNIX_COMPILER_LAUNCHER", "ccache")
    assert compiler_launcher() == shutil.which("ccache")
    monkeypatch.delenv("KERNELNIX_COMPILER_LAUNCHER")
    assert compiler_launcher() in (shutil.which("sccache"), shutil.which("ccache"))
