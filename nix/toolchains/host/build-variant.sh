# Builder of one variant with the host toolchain: the same Python build step as
# `kernelnix build --local`, on the filtered kernel source (read-only in the
# store: the step works in its own directory), into $out/<variant>/.
set -eu
. "$hostEnv"

installed=$("$KERNELNIX_PYTHON" -c \
  'import importlib.metadata as m; print(".".join(m.version("torch").split("+")[0].split(".")[:2]))')
case "$torchRequirement" in
  any) ;;
  "$installed") ;;
  *) kernelnix_fail "$variant needs torch $torchRequirement but $KERNELNIX_PYTHON has torch $installed;" \
       "run \`kernelnix generate\` so the flake offers the variants this machine can build" ;;
esac

export HOME="$TMPDIR/home" PYTHONPATH="$kernelnix" PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1
mkdir -p "$HOME"

# NIX_BUILD_CORES: Nix's `cores` setting; 0 means all of them (Ninja's default).
jobs=
if [ "${NIX_BUILD_CORES:-0}" -gt 0 ]; then jobs="--jobs $NIX_BUILD_CORES"; fi

# shellcheck disable=SC2086 # $jobs is empty or two words
exec "$KERNELNIX_PYTHON" -m kernelnix build-variant $jobs \
  --plan "$src/kernelnix-plan.json" \
  --variant "$variant" \
  --system "$targetSystem" \
  --source "$src" \
  --out "$out" \
  --unique-id "$uniqueId" \
  --toolchain host
