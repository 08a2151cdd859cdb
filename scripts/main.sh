#!/usr/bin/env bash
# The main job: install what is needed, generate the flake of the relu example
# kernel, build its bundle with Nix in the sandbox (the hermetic toolchain, the
# default: nothing of this machine's compilers or Python), check that every variant
# is publishable, and load the result with the real `kernels` package.
# `kernelnix build --local` is the no-Nix path (README).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
root=$PWD
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# A flake sees only what git tracks: the kernel gets a repository of its own.
echo "+ cp -r examples/relu $work/relu"
cp -r examples/relu "$work/relu"
rm -rf "$work/relu/build" "$work/relu/result"
echo "+ kernelnix generate $work/relu --kernelnix-url git+file://$root"
kernelnix generate "$work/relu" --kernelnix-url "git+file://$root"
git -C "$work/relu" init -q
git -C "$work/relu" add -A
# Lock before committing, so the tree Nix builds is clean (the op namespace then
# carries the commit, not a `_dirty` id).
(cd "$work/relu" && nix flake lock)
git -C "$work/relu" add flake.lock
git -C "$work/relu" commit -q -m "relu example"
# Every variant in the sandbox; no silent fallback to a build without it.
sandbox=(--option sandbox true --option sandbox-fallback false)
echo "+ nix build .#bundle ${sandbox[*]} (in $work/relu)"
(cd "$work/relu" && nix build .#bundle --print-build-logs "${sandbox[@]}")
# Publishable: each Linux variant passes the publishing policy (glibc 2.27, a private
# C++ runtime), and upload accepts the bundle (a dry run contacts no Hub). Each
# variant's build already loaded it through `kernels` in its own Torch.
for variant in "$work/relu/result"/torch*; do
  echo "+ kernelnix check --policy kernel --redistributable $(basename "$variant")"
  kernelnix check --policy kernel --redistributable --no-import "$variant"
done
echo "+ kernelnix upload --dry-run --no-import (in $work/relu)"
kernelnix upload --dry-run --no-import "$work/relu" | tail -n 3
echo "+ python3 -c 'kernels.get_local_kernel(result).relu(x)'"
python3 - "$work/relu/result" <<'PY'
import sys
from pathlib import Path

import torch
from kernels import get_local_kernel

bundle = Path(sys.argv[1])
relu = get_local_kernel(bundle)
x = torch.randn(8, 8)
out = relu.relu(x)
assert torch.equal(out, torch.relu(x)), "relu kernel gave a wrong result"
variants = sorted(p.name for p in bundle.iterdir() if (p / "metadata.json").is_file())
print(f"nix build .#bundle built {', '.join(variants)}")
print(f"loaded {relu.__name__} from the bundle; relu(x) matches torch.relu on {tuple(x.shape)}")
PY
