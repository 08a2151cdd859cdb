#!/usr/bin/env bash
# Install what is needed, then run the linters, the type checker and the whole test suite.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export HF_HUB_OFFLINE=1
echo "+ ruff check . && ruff format --check kernelnix tests benchmarks"
ruff check .
ruff format --check kernelnix tests benchmarks
echo "+ python3 -m mypy"
python3 -m mypy
# The e2e tests fetch more wheels than a CI machine's disk holds: below 25 GB
# free, the Nix store's garbage is collected between test modules
# (tests/support/store_room.py; pass --nix-gc-below 0 to keep everything).
echo "+ python3 -m pytest -q --durations=30 --nix-gc-below 25"
python3 -m pytest -q --durations=30 --nix-gc-below 25 "$@"
