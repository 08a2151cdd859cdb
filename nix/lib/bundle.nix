# A bundle: variants side by side, as the Hub expects them
# (`<variant>/metadata.json`, ...), plus benchmarks/ and, when the kernel has a
# CARD.md template and the bundle any variant, the rendered CARD.md. Each
# variant's metadata.json gets its build provenance (`kernelnix bundle`,
# kernelnix.publish.provenance) from `facts`: what the flake knows of the build
# (JSON). The variants' own derivations record none of it, so their bytes do not
# depend on the Nix or the machine that built them.
{
  system,
  name,
  variants,
  benchmarks,
  # A derivation with CARD.md (`kernelnix fill-card`), or null.
  card,
  # nix/lib/step.nix for the toolchain: runs kernelnix with its Python.
  step,
  facts,
}:
step {
  inherit system name;
  args = [
    "bundle"
    "--out"
    (builtins.placeholder "out")
    "--facts"
    (builtins.toFile "provenance-facts.json" facts)
  ]
  ++ (if benchmarks == null then [ ] else [ "--benchmarks" "${benchmarks}/benchmarks" ])
  ++ (if card == null || variants == { } then [ ] else [ "--card" "${card}/CARD.md" ])
  ++ map toString (builtins.attrValues variants);
  attributes = {
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
  );
}
// {
  # Its variants' names (kernelnix reproduce builds each from source).
  variantNames = builtins.attrNames variants;
}
