#!/usr/bin/env bash
# Install what kernelnix and its tests need on a fresh Debian 12 machine (idempotent).
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

need_apt=()
command -v nix >/dev/null 2>&1 || need_apt+=(nix-bin)
command -v git >/dev/null 2>&1 || need_apt+=(git)
command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
command -v ninja >/dev/null 2>&1 || need_apt+=(ninja-build)
command -v patchelf >/dev/null 2>&1 || need_apt+=(patchelf)
# elvish: the completion tests run its script in a real elvish session.
command -v elvish >/dev/null 2>&1 || need_apt+=(elvish)
# hipcc: the tests compile hipified device code with it (no ROCm Torch can be had here).
command -v hipcc >/dev/null 2>&1 || need_apt+=(hipcc)
# ccache: builds use it as the compiler launcher when installed (tests/compile/test_launcher.py).
command -v ccache >/dev/null 2>&1 || need_apt+=(ccache)
# sshd: tests/e2e/test_distributed.py starts one on 127.0.0.1 as a Nix remote builder.
[ -x /usr/sbin/sshd ] || need_apt+=(openssh-server)
if [ ${#need_apt[@]} -gt 0 ]; then
  echo "+ apt-get install -y ${need_apt[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_apt[@]}" >/dev/null
fi

# Offline Nix as root: flakes on, no substituters, no registry, no sandbox users.
if ! grep -qs "flakes" /etc/nix/nix.conf; then
  $SUDO mkdir -p /etc/nix
  $SUDO tee /etc/nix/nix.conf >/dev/null <<'CONF'
experimental-features = nix-command flakes
substituters =
flake-registry =
sandbox = false
build-users-group =
CONF
fi

# Torch first, so pip never resolves a CUDA build from the index.
python3 -c "import torch" 2>/dev/null || python3 -m pip install -q torch==2.13.0
python3 -m pip install -q -e '.[test]'
python3 -m pip install -q nvidia-cuda-cuobjdump 2>/dev/null || true
# A second environment with the CUDA 13.0 build of Torch 2.14.1 (about 5.5 GB, from
# this machine's disk), in which tests build and load CUDA variants with
# /usr/local/cuda's nvcc (tests/e2e/test_cuda_torch.py). Torch first, then the rest.
cuda_venv=${KERNELNIX_CUDA_VENV:-$PWD/.venv-cu130}
# nvidia-cutlass carries CUTLASS 3.8's headers (examples/cute-scale's `cutlass_3_8`).
if ! "$cuda_venv/bin/python" -c "import torch, kernels, cutlass_library; assert torch.version.cuda" 2>/dev/null; then
  echo "+ python3 -m venv $cuda_venv && pip install torch==2.14.1 (CUDA 13.0)"
  python3 -m venv "$cuda_venv"
  "$cuda_venv/bin/python" -m pip install -q torch==2.14.1
  "$cuda_venv/bin/python" -m pip install -q -e . kernels numpy nvidia-cutlass==3.8.0.0
fi
# taplo (the engine of Even Better TOML): the JSON Schema tests run it on build.toml files.
command -v taplo >/dev/null 2>&1 || npm install -g --silent @taplo/cli@0.7.0 >/dev/null

git config --global user.email >/dev/null || git config --global user.email "kernelnix@localhost"
git config --global user.name >/dev/null || git config --global user.name "kernelnix"
