# The kernelnix Nix library. `root` is the kernelnix source tree (the flake's
# `./.`); the build step inside every variant derivation runs kernelnix from
# a filtered copy of it, so a change to kernelnix's Python code rebuilds.
# `inputs`: the kernelnix flake's inputs (nixpkgs, nixpkgs-glibc-2_27) for
# the hermetic toolchain; only `?` is asked of them until a hermetic output is
# evaluated, so nothing is fetched for the host toolchain.
{
  root,
  inputs ? { },
}:
let
  util = import ./util.nix;
  rootString = toString root;
  relative = p: util.removePrefix (rootString + "/") (toString p);
  # What builds read: the package with its templates (kernelnix/templates), so
  # editing a README, a test or the flake template rebuilds nothing.
  kernelnixSrc = builtins.path {
    path = root;
    name = "kernelnix-source";
    filter =
      p: type:
      let
        rel = relative p;
      in
      (rel == "kernelnix" || util.hasPrefix "kernelnix/" rel)
      && baseNameOf p != "__pycache__"
      && !util.hasSuffix ".pyc" rel;
  };
  matrix = builtins.fromJSON (builtins.readFile (root + "/kernelnix/data/matrix.json"));
  hermetic = import ../hermetic { inherit util root matrix inputs; };
  toolchains = {
    host = import ../toolchains/host.nix { inherit util kernelnixSrc; };
    hermetic = import ../toolchains/hermetic.nix { inherit util hermetic; };
  };
in
{
  inherit hermetic;
  inherit (util) eachSystem shellQuote mkScript mkShell;
  inherit matrix;
  inherit kernelnixSrc;
  systems = matrix.systems;
  toolchainNames = builtins.attrNames toolchains;
  kernelFlake = import ./kernel-flake.nix { inherit util toolchains kernelnixSrc; };
}
