# kernelnix-generated: {"kernelnix-url": "kernelnix", "sha256": "114acbcc70e32192be9adfb49070e0564d3bb3d0f986c9ee726db60268d26a1b", "toolchain": "host"}
# Written by `kernelnix generate`. The outputs come from kernelnix-plan.json,
# which `kernelnix generate` rewrites after build.toml changes. Edit this file
# freely: kernelnix keeps an edited flake.nix unless you pass --force.
{
  description = "A Hugging Face Hub kernel, built with kernelnix";

  # Your kernelnix checkout ("git+file:///path/to/kernelnix"), or the name
  # "kernelnix" after `nix registry add kernelnix git+file:///path/to/kernelnix`.
  inputs.kernelnix.url = "kernelnix";

  outputs =
    { self, kernelnix, ... }@inputs:
    kernelnix.lib.kernelFlake {
      inherit self;
      path = ./.;
      toolchain = "host";
      # The hermetic toolchain builds with the nixpkgs kernelnix pins; a
      # `nixpkgs` input of this flake replaces it.
      nixpkgs = inputs.nixpkgs or null;
    };
}
