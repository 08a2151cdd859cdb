# kernelnix-generated: {"kernelnix-url": "git+file:///src/kernelnix", "sha256": "7768b3503075b4e4601179413e0adf856eb7e3d5903915d3600f23a89d14d447", "toolchain": "host"}
# Written by `kernelnix generate`. The outputs come from kernelnix-plan.json,
# which `kernelnix generate` rewrites after build.toml changes. Edit this file
# freely: kernelnix keeps an edited flake.nix unless you pass --force.
{
  description = "A Hugging Face Hub kernel, built with kernelnix";

  # Your kernelnix checkout ("git+file:///path/to/kernelnix"), or the name
  # "kernelnix" after `nix registry add kernelnix git+file:///path/to/kernelnix`.
  inputs.kernelnix.url = "git+file:///src/kernelnix";

  outputs =
    { self, kernelnix, ... }@inputs:
    kernelnix.lib.kernelFlake {
      inherit self;
      path = ./.;
      toolchain = "host";
      # The hermetic toolchain builds with nixpkgs: add a nixpkgs input for it.
      nixpkgs = inputs.nixpkgs or null;
    };
}
