{
  description = "fused-scale: a CPU + CUDA kernel built by this checkout of kernelnix";

  # The kernelnix checkout this example lives in. A kernel of your own names
  # kernelnix's flake URL instead (`kernelnix nix-library` prints it).
  inputs.kernelnix.url = "path:../..";

  outputs =
    { self, kernelnix }:
    kernelnix.lib.kernelFlake {
      inherit self;
      path = ./.;
    };
}
