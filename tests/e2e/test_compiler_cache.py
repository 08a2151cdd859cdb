"""The opt-in compiler cache of Nix builds: ccache in a directory shared by the
builds, reached through `extra-sandbox-paths` with the sandbox on. After a cold
`nix build` of examples/fused-scale's CUDA variant (host toolchain, the CUDA Torch
environment of scripts/setup.sh) from a dirty tree, a second edit of one `.cu` file
recompiles that file only: the other `.cu` file and the bindings come from the cache
(the op namespace the bindings expand is the dirty tree's, the same for every edit of
one commit). Off by default: the default derivation has no cache.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from compiler_cache import build_with_cache, new_cache
from cuda_torch import PYTHON, VARIANT, cuda_torch_missing, with_cuda_torch
from nix_projects import clone_worktree, git, make_project, nix, nix_environment
from paths import EXAMPLES

# Two cold CUDA builds, about 2 minutes: `pytest --heavy` (ccache itself is in CI
# through tests/compile/test_launcher.py).
pytestmark = [
    pytest.mark.slow,
    pytest.mark.heavy,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
    pytest.mark.skipif(shutil.which("ccache") is None, reason="needs ccache (scripts/setup.sh)"),
]


def test_an_edited_cu_file_is_the_only_one_compiled_again(tmp_path: Path) -> None:
    missing = cuda_torch_missing()
    if missing:
        if os.environ.get("CI"):
            pytest.fail(f"CI needs them: {missing}")
        pytest.skip(missing)
    url = clone_worktree(tmp_path / "kernelnix")
    env = with_cuda_torch(nix_environment(tmp_path / "registry.json", url))
    project = make_project(EXAMPLES / "fused-scale", tmp_path / "fused-scale", url, env)

    # Off by default: no cache in the derivation.
    default = json.loads(nix(project, env, "show-derivation", f".#{VARIANT}").stdout)
    assert "KERNELNIX_COMPILER_CACHE" not in next(iter(default.values()))["env"]

    # An author's tree: committed, then edited (dirty) before the first build.
    git(project, "commit", "-qm", "fused-scale")
    edited = project / "fused_scale_cuda" / "kernels.cu"
    edited.write_text(edited.read_text() + "\n// a first edit\n")
    git(project, "add", "-A")
    cache = new_cache(tmp_path / "ccache")
    compiled, served = build_with_cache(project, env, VARIANT, cache, PYTHON)
    binding = "torch-ext/torch_binding.cpp"
    assert compiled == ["fused_scale_cuda/dispatch.cu", "fused_scale_cuda/kernels.cu", binding]
    assert served == []

    edited.write_text(edited.read_text() + "namespace { [[maybe_unused]] int edited = 1; }\n")
    git(project, "add", "-A")
    compiled, served = build_with_cache(project, env, VARIANT, cache, PYTHON)
    assert compiled == ["fused_scale_cuda/kernels.cu"]
    assert served == ["fused_scale_cuda/dispatch.cu", binding]
