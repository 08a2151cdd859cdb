# kernelnix-generated: {"kernelnix-url": "git+file:///src/kernelnix", "sha256": "3e7022636ab3d02e09630f084511198557e397ba99f39caf173503da83996e87", "toolchain": "hermetic"}
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
  inputs.kernelnix.url = "git+file:///src/kernelnix";

  outputs =
    { self, kernelnix, ... }:
    kernelnix.lib.kernelFlake {
      inherit self;
      path = ./.;
      toolchain = "hermetic";
    };
}
