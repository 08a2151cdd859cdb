{
  description = "kernelnix: build Hugging Face Hub PyTorch kernels from build.toml with Nix";

  # Binary caches for the hermetic toolchain's builds (nixpkgs' CUDA packages
  # are unfree, so cache.nixos.org has none of them). Nix applies these only to
  # users it trusts (`trusted-users`) who accept them (`accept-flake-config`),
  # and only when this flake is the one built; docs/hermetic.md has the
  # settings, and how to add a cache of your own.
  nixConfig = {
    extra-substituters = [ "https://cache.nixos-cuda.org" ];
    extra-trusted-public-keys = [ "cache.nixos-cuda.org:74DUi4Ye579gUqzH4ziL9IyiJBlDpMRn9MBN8oNan9M=" ];
  };

  # The hermetic toolchain's nixpkgs, pinned in flake.lock (docs/hermetic.md
  # says where the pins come from). The host toolchain never evaluates them,
  # so nothing here is fetched for it: Nix copies the locked entries into a
  # kernel's flake.lock without downloading them.
  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixpkgs-unstable";
    # glibc 2.27: the last nixpkgs revisions that ship it (nix/toolchains/hermetic/glibc.nix).
    nixpkgs-glibc-2_27 = {
      url = "github:NixOS/nixpkgs/a9eb3eed170fa916e0a8364e5227ee661af76fde";
      flake = false;
    };
  };

  outputs =
    {
      self,
      nixpkgs,
      nixpkgs-glibc-2_27,
    }:
    let
      lib = import ./nix/lib {
        root = ./.;
        inputs = { inherit nixpkgs nixpkgs-glibc-2_27; };
      };
      hermeticPkgs = lib.hermetic.pkgsFor { inherit nixpkgs; };
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
    # Per system of the hermetic toolchain: its build sets (torch213-cu126, ...)
    # and the Nix-packaged kernelnix. Evaluating these imports nixpkgs.
    // lib.eachSystem lib.hermetic.select.data.systems (system: {
      legacyPackages = {
        hermetic = (hermeticPkgs system).kernelnixHermetic.entries;
        kernelnix = (hermeticPkgs system).kernelnix;
      };
    })
    // {
      lib = {
        inherit (lib)
          kernelFlake
          genKernelFlakeOutputs
          genFlakeOutputs
          eachSystem
          shellQuote
          matrix
          systems
          toolchainNames
          ;
        # The Torch wheels the hermetic toolchain fetches (data only).
        hermeticWheels = lib.hermetic.select.wheelKeys;
      };

      # kernelnix's nixpkgs overlay: `kernelnix` (the Python application) and
      # `kernelnixHermetic` (glibc 2.27, and per build set its Torch, toolkit,
      # compiler and Python; nix/toolchains/hermetic/overlay.nix).
      overlays.default = lib.hermetic.overlay;

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
