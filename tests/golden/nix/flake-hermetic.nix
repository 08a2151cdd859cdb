# kernelnix-generated: {"kernelnix-url": "git+file:///src/kernelnix", "sha256": "33ec1c2206a3c737cb26172825c56008b64b0de021cda23688daebd5414e431e", "toolchain": "hermetic"}
# Written by `kernelnix generate`. The outputs come from kernelnix-plan.json,
# which `kernelnix generate` rewrites after build.toml changes. Edit this file
# freely: kernelnix keeps an edited flake.nix unless you pass --force.
{
  description = "A Hugging Face Hub kernel, built with kernelnix";

  # The binary cache of kernelnix's hermetic builds. Nix uses it for users it
  # trusts (`trusted-users`) who accept it (`accept-flake-config`); see
  # kernelnix's docs/hermetic.md.
  nixConfig = {
    extra-substituters = [ "https://cache.nixos-cuda.org" ];
    extra-trusted-public-keys = [ "cache.nixos-cuda.org:74DUi4Ye579gUqzH4ziL9IyiJBlDpMRn9MBN8oNan9M=" ];
  };

  # kernelnix's flake. With the name "kernelnix", kernelnix's own commands
  # (`kernelnix build`, `devshell`, ...) pass the Nix library installed with
  # them; for plain `nix build`, run once:
  #   nix registry add kernelnix "$(kernelnix nix-library)"
  # Or name a checkout: "git+file:///path/to/kernelnix".
  inputs.kernelnix.url = "git+file:///src/kernelnix";

  outputs =
    { self, kernelnix, ... }@inputs:
    kernelnix.lib.kernelFlake {
      inherit self;
      path = ./.;
      toolchain = "hermetic";
      # The hermetic toolchain builds with the nixpkgs kernelnix pins; a
      # `nixpkgs` input of this flake replaces it.
      nixpkgs = inputs.nixpkgs or null;
    };
}
