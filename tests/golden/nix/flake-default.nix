# kernelnix-generated: {"kernelnix-url": "kernelnix", "sha256": "86c60cde26c2149f7e972f6e8fd8233a209a0cf068d372351ecc6b20ce8dac57", "toolchain": "host"}
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
      # The hermetic toolchain builds with nixpkgs: add a nixpkgs input for it.
      nixpkgs = inputs.nixpkgs or null;
    };
}
