# kernelnix-generated: {"kernelnix-url": "kernelnix", "sha256": "d6ae3f0b2f2efbe2fa37eee00d6d7faa8a75aa7414cad409030687372b26698b", "toolchain": "hermetic"}
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
    { self, kernelnix, ... }:
    kernelnix.lib.kernelFlake {
      inherit self;
      path = ./.;
      toolchain = "hermetic";
    };
}
