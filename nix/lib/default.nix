# The kernelnix Nix library. `root` is the kernelnix source tree (the flake's
# `./.`); the build step inside every variant derivation runs kernelnix from
# a filtered copy of it, so a change to kernelnix's Python code rebuilds.
# `defaultToolchain`: the toolchain of a kernel flake that names none (and of
# every kernel-builder flake): hermetic, or host for nix/flakes/host.
# `revision`: the git commit and NAR hash of this kernelnix's flake (null outside
# a flake), which the build provenance of a bundle records.
{
  root,
  defaultToolchain ? "hermetic",
  revision ? {
    rev = null;
    narHash = null;
  },
}:
let
  util = import ./util.nix;
  # kernelnix's own files, as a filtered copy of `root`: the package with its
  # templates (kernelnix/), never caches or bytecode; so editing a README, a
  # test or the flake template rebuilds nothing. Every part of kernelnix that
  # Nix builds from is this one copy.
  kernelnixSrc = builtins.path {
    path = root;
    name = "kernelnix-source";
    filter =
      p: type:
      let
        rel = util.removePrefix (toString root + "/") (toString p);
      in
      (rel == "kernelnix" || util.hasPrefix "kernelnix/" rel)
      && baseNameOf p != "__pycache__"
      && !util.hasSuffix ".pyc" rel;
  };
  matrix = builtins.fromJSON (builtins.readFile (root + "/kernelnix/data/matrix.json"));
  # One toolchain per name in matrix.json's `toolchains` (the list kernelnix's
  # Python offers too), from its directory nix/toolchains/<name>/.
  toolchains = util.genAttrs matrix.toolchains (
    name: import (../toolchains + "/${name}") { inherit util kernelnixSrc; }
  );
  kernelFlake = import ./kernel-flake.nix {
    inherit
      util
      toolchains
      kernelnixSrc
      matrix
      defaultToolchain
      ;
    kernelnix = revision // {
      version = builtins.head (
        builtins.match ''.*__version__ = "([^"]+)".*'' (builtins.readFile (root + "/kernelnix/__init__.py"))
      );
    };
  };
in
rec {
  inherit kernelFlake;
  # kernel-builder's names for kernelFlake (./kernel-builder.nix).
  inherit (import ./kernel-builder.nix { inherit kernelFlake; }) genKernelFlakeOutputs genFlakeOutputs;
  inherit (util) eachSystem shellQuote mkScript mkShell;
  inherit matrix;
  inherit kernelnixSrc;
  systems = matrix.systems;
  toolchainNames = matrix.toolchains;
  # What a kernelnix flake exports as `lib` (this repository's and nix/flakes/host's).
  flakeLib = {
    inherit
      kernelFlake
      genKernelFlakeOutputs
      genFlakeOutputs
      eachSystem
      shellQuote
      matrix
      systems
      toolchainNames
      ;
  };
}
