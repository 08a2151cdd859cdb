# kernelnix-generated: {"kernelnix-url": "kernelnix", "sha256": "9057eb60f69d8afc3e42c62f815fc2ae1d9421cfb1e3e74c49c06049abe03847", "toolchain": "host"}
# Written by `kernelnix generate`. The outputs come from kernelnix-plan.json,
# which `kernelnix generate` rewrites after build.toml changes. Edit this file
# freely: kernelnix keeps an edited flake.nix unless you pass --force.
{
  description = "A Hugging Face Hub kernel, built with kernelnix";

  # kernelnix's flake. With the name "kernelnix", kernelnix's own commands
  # (`kernelnix build`, `devshell`, ...) pass the Nix library installed with
  # them; for plain `nix build`, run once:
  #   nix registry add kernelnix "$(kernelnix nix-library)"
  # Or name a checkout: "git+file:///path/to/kernelnix".
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
