#!/usr/bin/env bash
# The main job: install what is needed, build the relu example kernel for this
# machine (no Nix needed) and load it with the real `kernels` package.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
echo "+ kernelnix check-config examples/relu"
kernelnix check-config examples/relu
echo "+ kernelnix build --local examples/relu"
kernelnix build --local examples/relu
echo "+ python3 -c 'kernels.get_local_kernel(examples/relu/build).relu(x)'"
python3 - <<'PY'
from pathlib import Path

import torch
from kernels import get_local_kernel

relu = get_local_kernel(Path("examples/relu/build"))
x = torch.randn(8, 8)
out = relu.relu(x)
assert torch.equal(out, torch.relu(x)), "relu kernel gave a wrong result"
print(f"loaded {relu.__name__} from examples/relu/build; relu(x) matches torch.relu on {tuple(x.shape)}")
PY
