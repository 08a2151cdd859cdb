# The hermetic toolchain's packages: nixpkgs (pinned in kernelnix's
# flake.lock) with kernelnix's overlay (./overlay.nix), once per system.
#
# Laziness matters: the kernelnix flake's inputs reach here unevaluated, and
# only `inputs ? nixpkgs` is asked of them until a hermetic derivation, shell
# or package is evaluated. The names of the variants the toolchain offers come
# from data alone (matrix.json, ./select.nix), so listing them fetches nothing.
{
  util,
  root,
  matrix,
  inputs,
  kernelnixSource,
}:
let
  lock = builtins.fromJSON (builtins.readFile (root + "/kernelnix/data/wheel-lock.json"));
  select = import ./select.nix { inherit util matrix lock; };

  # What the Nix-packaged kernelnix is built from: the Python package (with its
  # templates) and the files pyproject.toml names.
  pythonSource = kernelnixSource {
    name = "kernelnix-python-source";
    files = [
      "pyproject.toml"
      "README.md"
    ];
  };

  glibcInput = name: "kernelnix (hermetic toolchain): the kernelnix flake has no `${name}` input; use kernelnix through its flake, whose flake.lock pins it";

  overlayWith =
    glibcNixpkgs:
    import ./overlay.nix {
      inherit
        util
        select
        glibcNixpkgs
        pythonSource
        ;
      pyproject = builtins.fromTOML (builtins.readFile (root + "/pyproject.toml"));
    };
  glibcNixpkgs = inputs.nixpkgs-glibc-2_27 or (throw (glibcInput "nixpkgs-glibc-2_27"));

  # nixpkgs with kernelnix's overlay (then `overlays`) for one system. CUDA is
  # unfree: allowUnfree is set here, for the toolkits and nothing else.
  importNixpkgs =
    {
      nixpkgs,
      overlays,
    }:
    system:
    import nixpkgs {
      inherit system;
      config.allowUnfree = true;
      overlays = [ (overlayWith glibcNixpkgs) ] ++ overlays;
    };
in
{
  inherit select pythonSource;
  # build.toml `depends` that give headers, with their pinned GitHub sources.
  headerDependencies =
    (builtins.fromJSON (builtins.readFile (root + "/kernelnix/data/dependencies.json"))).dependencies;
  # general.python-depends names -> nixpkgs' python3.pkgs attributes (`nix`).
  pythonDependencies = builtins.fromJSON (
    builtins.readFile (root + "/kernelnix/data/python_dependencies.json")
  );
  # Whether the kernelnix flake brought its pinned nixpkgs (never forces it).
  hasPinnedNixpkgs = inputs ? nixpkgs;
  pinnedNixpkgs = inputs.nixpkgs;
  overlay = overlayWith glibcNixpkgs;
  # pkgsFor { nixpkgs = <source>; overlays = [ ]; } -> system -> package set,
  # one import per system.
  pkgsFor =
    {
      nixpkgs,
      overlays ? [ ],
    }:
    let
      bySystem = util.genAttrs select.data.systems (importNixpkgs { inherit nixpkgs overlays; });
    in
    system:
    bySystem.${system}
      or (throw "kernelnix (hermetic toolchain): no hermetic builds for ${system}; it builds for ${builtins.concatStringsSep ", " select.data.systems}");
}
