#!/usr/bin/env bash
# The main job: install what is needed, then validate every example kernel and
# print its normalized edition-5 config.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
for example in examples/*/; do
  echo "+ kernelnix check-config --json ${example}"
  kernelnix check-config --json "${example}"
done
