#!/usr/bin/env bash
# On a machine with an NVIDIA GPU: load every variant of each bundle in its own
# Torch (its locked wheels) and run its ops against Torch (scripts/gpu_check.py).
#   bash scripts/gpu-check.sh examples/fused-scale/result path/to/activation/result
set -euo pipefail
cd "$(dirname "$0")/.."
export HF_HUB_OFFLINE=1
exec python3 scripts/gpu_check.py "$@"
