# kernelnix-generated: {"kernelnix-url": "git+file:///src/kernelnix", "sha256": "8d90660fb29b121cbbf76826bbb5e070ebe874a8d4a0c4c207b3d2c8ccf994d5", "toolchain": "host"}
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
      # The hermetic toolchain builds with the nixpkgs kernelnix pins; a
      # `nixpkgs` input of this flake replaces it.
      nixpkgs = inputs.nixpkgs or null;
    };
}
