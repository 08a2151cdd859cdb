"""The opt-in compiler cache of Nix builds: ccache in a directory shared by the
builds, reached through `extra-sandbox-paths` with the sandbox on. After a cold
`nix build` of examples/fused-scale's CUDA variant (host toolchain, the CUDA Torch
environment of scripts/setup.sh), an edit of one `.cu` file recompiles that file
and nothing else. Off by default: the default derivation has no cache.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
from nix_projects import clone_worktree, git, nix, nix_environment
from paths import EXAMPLES, ROOT

VARIANT = "torch214-cxx11-cu130-x86_64-linux"
NVCC = Path("/usr/local/cuda/bin/nvcc")
VENV = Path(os.environ.get("KERNELNIX_CUDA_VENV", ROOT / ".venv-cu130"))

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
    pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache (scripts/setup.sh)"),
]


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


def test_an_edited_cu_file_is_the_only_one_compiled_again(tmp_path: Path) -> None:
    python = VENV / "bin" / "python"
    missing = [str(p) for p in (python, NVCC) if not p.exists()]
    if missing:
        reason = f"no CUDA Torch environment or nvcc ({', '.join(missing)}); scripts/setup.sh"
        if os.environ.get("CI"):
            pytest.fail(f"CI needs them: {reason}")
        pytest.skip(reason)
    url = clone_worktree(tmp_path / "kernelnix")
    env = {
        **nix_environment(tmp_path / "registry.json", url),
        "PATH": f"{python.parent}{os.pathsep}{NVCC.parent}{os.pathsep}{os.environ['PATH']}",
        "PYTHONPATH": str(ROOT),
    }
    project = tmp_path / "fused-scale"
    shutil.copytree(EXAMPLES / "fused-scale", project)
    subprocess.run(
        [python, "-m", "kernelnix", "generate", str(project), "--kernelnix-url", url],
        check=True,
        capture_output=True,
        env=env,
    )
    git(project, "init", "-q")
    git(project, "add", "-A")

    # Off by default: no cache in the derivation.
    default = json.loads(nix(project, env, "show-derivation", f".#{VARIANT}").stdout)
    assert "KERNELNIX_COMPILER_CACHE" not in next(iter(default.values()))["env"]

    cache = tmp_path / "ccache"
    cache.mkdir()
    cached_env = {**env, "KERNELNIX_COMPILER_CACHE": str(cache)}
    options = [
        "--impure",  # reads KERNELNIX_COMPILER_CACHE (kernelFlake's compilerCache)
        "--option", "sandbox", "true",
        "--option", "extra-sandbox-paths", sandbox_paths(python, cache),
    ]  # fmt: skip

    def build() -> tuple[int, int]:
        before = ccache_stats(cache)
        nix(project, cached_env, "build", f".#{VARIANT}", "--no-link", *options)
        return counts(before, ccache_stats(cache))

    missed, served = build()
    assert missed >= 3 and served == 0, (missed, served)  # two .cu files and the bindings

    edited = project / "fused_scale_cuda" / "kernels.cu"
    edited.write_text(edited.read_text() + "\nnamespace { [[maybe_unused]] int edited = 1; }\n")
    git(project, "add", "-A")
    assert build() == (1, missed - 1)
