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
echo "+ python3 -m pytest -q"
python3 -m pytest -q --durations=30 "$@"
