{
  description = "kernelnix: build Hugging Face Hub PyTorch kernels from build.toml with Nix";

  # No inputs: everything here evaluates and builds without the network. The
  # host toolchain uses this machine's compilers and Python; the hermetic one
  # takes nixpkgs from the kernel project's flake.
  outputs =
    { self }:
    let
      lib = import ./nix/lib { root = ./.; };
      perSystem = system: {
        # `nix run <kernelnix> -- generate .`: python3 (or $KERNELNIX_PYTHON)
        # with this source on PYTHONPATH.
        packages = rec {
          kernelnix = lib.mkScript {
            inherit system;
            name = "kernelnix";
            text = ''
              #!/bin/sh
              export PYTHONPATH=${lib.kernelnixFullSrc}''${PYTHONPATH:+:$PYTHONPATH}
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
      lib = {
        inherit (lib)
          kernelFlake
          eachSystem
          shellQuote
          matrix
          systems
          toolchainNames
          ;
      };

      templates.default = {
        path = ./templates/flake/init/default;
        description = "A CPU relu kernel with build.toml, tests and a kernelnix flake";
        welcomeText = ''
          A kernelnix kernel project. Stage the files, then build:

              git add -A && nix build        # the bundle, in ./result
              nix run .#ci-test              # kernels_ci tests against the built variant

          flake.nix finds kernelnix through the flake registry name `kernelnix`:
          `nix registry add kernelnix git+file:///path/to/kernelnix` once.
          After editing build.toml run `kernelnix generate`.
        '';
      };
    };
}
