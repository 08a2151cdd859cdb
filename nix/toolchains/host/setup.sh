# Sourced by the shared variant builder (nix/lib/build-variant.sh) for the
# host toolchain: this machine's Python (host/env.sh) with kernelnix's source on
# PYTHONPATH, and the variant's Torch: its locked wheels' environment when it
# has one, else the Python's own, checked for the version the variant needs;
# its python-depends' environment after it;
# then this machine checked against the recorded identity the derivation is
# addressed by ($hostIdentity, ./identity.nix), so that a builder with other
# compilers refuses to build instead of producing what the store path misdescribes.
. "$hostEnv"

if [ -n "${wheelEnv:-}" ]; then
  # The variant's own Torch (and nvcc) from its locked wheels (wheels.nix).
  export PYTHONPATH="$wheelEnv:$kernelnix"
  for nvcc in "$wheelEnv"/nvidia/*/bin/nvcc; do
    if [ -x "$nvcc" ]; then PATH=${nvcc%/nvcc}:$PATH; fi
  done
  export PATH
else
  case "$torchRequirement" in
    any | none) ;;
    *)
      installed=$("$KERNELNIX_PYTHON" -c \
        'import importlib.metadata as m; print(".".join(m.version("torch").split("+")[0].split(".")[:2]))')
      [ "$installed" = "$torchRequirement" ] ||
        kernelnix_fail "$variant needs torch $torchRequirement but $KERNELNIX_PYTHON has torch $installed;" \
          "run \`kernelnix generate\` so the flake offers the variants this machine can build"
      ;;
  esac
  export PYTHONPATH="$kernelnix"
fi
if [ -n "${dependsEnv:-}" ]; then
  # The variant's python-depends from the wheel lock (wheels.nix), after its Torch.
  PYTHONPATH="${wheelEnv:+$wheelEnv:}$dependsEnv:$kernelnix"
fi
if [ -n "${dependsAlternatives:-}" ]; then
  # Their other locked releases, which the import check tries where the variant
  # fails to load with the first (kernelnix.checks.import_check).
  export KERNELNIX_PYTHON_DEPENDS="$dependsEnv"
  KERNELNIX_PYTHON_DEPENDS_ALTERNATIVES=$(printf '%s' "$dependsAlternatives" | tr ' ' ':')
  export KERNELNIX_PYTHON_DEPENDS_ALTERNATIVES
fi
if [ -n "${hostIdentity:-}" ]; then
  # -B: no bytecode written into kernelnix's source, a store path.
  "$KERNELNIX_PYTHON" -B -m kernelnix.host.identity "$hostIdentity" || exit 1
fi
