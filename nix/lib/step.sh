# Builder of ./step.nix: `kernelnix "$@"` with the toolchain's Python, which
# $toolchainSetup sets (KERNELNIX_PYTHON, PATH); the command writes into $out.
set -eu
. "$toolchainSetup"
export HOME="$TMPDIR/home" PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1
mkdir -p "$HOME" "$out"
exec "$KERNELNIX_PYTHON" -m kernelnix "$@"
