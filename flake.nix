{
  description = "kernelnix: build Hugging Face Hub PyTorch kernels from build.toml with Nix";

  outputs =
    { self }:
    let
      lib = import ./nix/lib {
        root = ./.;
        # Which kernelnix this is, for the build provenance of what it builds.
        revision = {
          rev = self.rev or null;
          narHash = self.narHash or null;
        };
      };
      perSystem = system: {
        # `nix run <kernelnix> -- generate .`: python3 (or $KERNELNIX_PYTHON)
        # with this source on PYTHONPATH.
        packages = rec {
          kernelnix = lib.mkScript {
            inherit system;
            name = "kernelnix";
            text = ''
              #!/bin/sh
              export PYTHONPATH=${lib.kernelnixSrc}''${PYTHONPATH:+:$PYTHONPATH}
              exec "''${KERNELNIX_PYTHON:-python3}" -m kernelnix "$@"
            '';
          };
          default = kernelnix;
        };
        devShells.default = lib.mkShell {
          inherit system;
          name = "kernelnix-dev-shell";
          env = { };
          shellHook = ''
            export PYTHONPATH="$PWD''${PYTHONPATH:+:$PYTHONPATH}"
            echo "kernelnix dev shell: python3 -m kernelnix and pytest use this checkout"
          '';
        };
      };
    in
    lib.eachSystem lib.systems perSystem
    // {
      lib = lib.flakeLib;

      templates.default = {
        path = ./nix/templates/default;
        description = "A CPU relu kernel with build.toml, tests and a kernelnix flake";
        welcomeText = ''
          A kernelnix kernel project. Stage the files, then build:

              git add -A && nix build        # the bundle, in ./result
              nix run .#ci-test              # kernels_ci tests against the built variant

          flake.nix finds kernelnix through the name `kernelnix`: `kernelnix build`
          passes its own Nix library; for plain `nix`, once:
          nix registry add kernelnix "$(kernelnix nix-library)"
          After editing build.toml run `kernelnix generate`.
        '';
      };
    };
}
