# Builder of one variant, for every toolchain: the same Python build step as
# `kernelnix build --local`, on the filtered kernel source (read-only in the
# store: the step works in its own directory), into $out/<variant>/.
# $toolchainSetup (the toolchain's) sets KERNELNIX_PYTHON and PATH.
set -eu
. "$toolchainSetup"

export HOME="$TMPDIR/home" PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1
mkdir -p "$HOME"

# NIX_BUILD_CORES: Nix's `cores` setting; 0 means all of them (Ninja's default).
jobs=
if [ "${NIX_BUILD_CORES:-0}" -gt 0 ]; then jobs="--jobs $NIX_BUILD_CORES"; fi
policy=
if [ -n "$redistributable" ]; then policy=--redistributable; fi
if [ -n "${noImportCheck:-}" ]; then policy="$policy --no-import-check"; fi

# shellcheck disable=SC2086 # $jobs is empty or two words, $policy up to two
exec "$KERNELNIX_PYTHON" -m kernelnix build-variant $jobs $policy \
  --plan "$planFile" \
  --variant "$variant" \
  --system "$targetSystem" \
  --source "$src" \
  --out "$out" \
  --unique-id "$uniqueId" \
  --kernel-git "$kernelGit" \
  --toolchain "$toolchainName"
