# kernelnix-generated: {"kernelnix-url": "git+file:///src/kernelnix", "sha256": "0db973c9373aed5536918d7e255c7071054427a6d5a0db8fd1d1770222d11efc", "toolchain": "host"}
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
      toolchain = "host";
    };
}
