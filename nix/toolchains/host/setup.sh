# Sourced by the shared variant builder (nix/lib/build-variant.sh) for the
# host toolchain: this machine's Python (host/env.sh), checked for the Torch
# version the variant needs, with kernelnix's source on PYTHONPATH.
. "$hostEnv"

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
