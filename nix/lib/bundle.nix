# A bundle: variants side by side, as the Hub expects them
# (`<variant>/metadata.json`, ...), plus benchmarks/ and, when the kernel has a
# CARD.md template and the bundle any variant, the rendered CARD.md.
{ util }:
{
  system,
  name,
  variants,
  benchmarks,
  # A derivation with CARD.md (`kernelnix fill-card`), or null.
  card,
  # The toolchain's shell and PATH (buildTools): the host's /bin/sh, or
  # the registry's busybox for the hermetic toolchain.
  tools,
}:
builtins.derivation (
  {
    inherit system name;
    builder = tools.shell;
    args = [
      "-c"
      ''
        set -eu
        mkdir -p "$out"
        for variant in $variants; do cp -r "$variant"/. "$out"/; done
        if [ -n "$benchmarks" ]; then cp -r "$benchmarks/benchmarks" "$out/benchmarks"; fi
        if [ -n "$card" ]; then cp "$card/CARD.md" "$out/CARD.md"; fi
      ''
    ];
    variants = builtins.attrValues variants;
    benchmarks = if benchmarks == null then "" else benchmarks;
    card = if card == null || variants == { } then "" else card;
    PATH = tools.path;
    # A copy: cheaper here than on a remote builder. Substituted when its variants
    # may be (a binary cache then serves `.#bundle` alone, as `nix copy .#bundle`
    # pushes it), else built from them.
    preferLocalBuild = true;
  }
  // (
    if builtins.all (variant: variant.allowSubstitutes or true) (builtins.attrValues variants) then
      { }
    else
      { allowSubstitutes = false; }
  )
)
