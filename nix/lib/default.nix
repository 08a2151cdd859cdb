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
  underAny =
    dirs: rel: builtins.any (dir: rel == dir || util.hasPrefix (dir + "/") rel) dirs;
  kernelnixSource =
    name: excluded:
    builtins.path {
      path = root;
      inherit name;
      filter =
        p: type:
        let
          rel = relative p;
        in
        underAny [ "kernelnix" "templates" ] rel
        && !underAny excluded rel
        && baseNameOf p != "__pycache__"
        && !util.hasSuffix ".pyc" rel;
    };
  # What builds read: the package and its templates, not the flake templates
  # (editing those must not rebuild every kernel).
  kernelnixSrc = kernelnixSource "kernelnix-source" [ "templates/flake" ];
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
  # Everything, for the `kernelnix` package.
  kernelnixFullSrc = kernelnixSource "kernelnix-full-source" [ ];
  systems = matrix.systems;
  toolchainNames = builtins.attrNames toolchains;
  kernelFlake = import ./kernel-flake.nix { inherit util toolchains kernelnixSrc; };
}
