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
  # kernelnix's own files, as a filtered copy of `root`: the package with its
  # templates (kernelnix/) plus the top-level `files`; never caches or bytecode.
  # Every part of kernelnix that Nix builds from is made by this one filter.
  kernelnixSource =
    {
      name,
      files ? [ ],
    }:
    builtins.path {
      path = root;
      inherit name;
      filter =
        p: type:
        let
          rel = util.removePrefix (toString root + "/") (toString p);
        in
        (builtins.elem rel files || rel == "kernelnix" || util.hasPrefix "kernelnix/" rel)
        && baseNameOf p != "__pycache__"
        && !util.hasSuffix ".pyc" rel;
    };
  # What builds read: the package alone, so editing a README, a test or the
  # flake template rebuilds nothing.
  kernelnixSrc = kernelnixSource { name = "kernelnix-source"; };
  matrix = builtins.fromJSON (builtins.readFile (root + "/kernelnix/data/matrix.json"));
  hermetic = import ../toolchains/hermetic/packages.nix {
    inherit
      util
      root
      matrix
      inputs
      kernelnixSource
      ;
  };
  # One toolchain per name in matrix.json's `toolchains` (the list kernelnix's
  # Python offers too), from its directory nix/toolchains/<name>/.
  toolchains = util.genAttrs matrix.toolchains (
    name: import (../toolchains + "/${name}") { inherit util kernelnixSrc hermetic; }
  );
  kernelFlake = import ./kernel-flake.nix {
    inherit
      util
      toolchains
      kernelnixSrc
      matrix
      ;
  };
in
{
  inherit hermetic kernelFlake;
  # kernel-builder's names for kernelFlake (./kernel-builder.nix).
  inherit (import ./kernel-builder.nix { inherit kernelFlake; }) genKernelFlakeOutputs genFlakeOutputs;
  inherit (util) eachSystem shellQuote mkScript mkShell;
  inherit matrix;
  inherit kernelnixSrc;
  systems = matrix.systems;
  toolchainNames = matrix.toolchains;
}
