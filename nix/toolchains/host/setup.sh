# Sourced by the shared variant builder (nix/lib/build-variant.sh) for the
# host toolchain: this machine's Python (host/env.sh), checked for the Torch
# version the variant needs, with kernelnix's source on PYTHONPATH; and this
# machine checked against the recorded identity the derivation is addressed by
# ($hostIdentity, ./identity.nix), so that a builder with other compilers
# refuses to build instead of producing what the store path misdescribes.
. "$hostEnv"

installed=$("$KERNELNIX_PYTHON" -c \
  'import importlib.metadata as m; print(".".join(m.version("torch").split("+")[0].split(".")[:2]))')
case "$torchRequirement" in
  any) ;;
  "$installed") ;;
  *) kernelnix_fail "$variant needs torch $torchRequirement but $KERNELNIX_PYTHON has torch $installed;" \
       "run \`kernelnix generate\` so the flake offers the variants this machine can build" ;;
esac

export PYTHONPATH="$kernelnix"
if [ -n "${hostIdentity:-}" ]; then
  # -B: no bytecode written into kernelnix's source, a store path.
  "$KERNELNIX_PYTHON" -B -m kernelnix.host.identity "$hostIdentity" || exit 1
fi
