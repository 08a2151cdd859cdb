# The hermetic toolchain: everything from nixpkgs (pinned in kernelnix's
# flake.lock, or the kernel flake's own `nixpkgs` input) with kernelnix's
# overlay: per build set its own Torch wheel, CUDA/ROCm toolkit and a C/C++
# compiler on glibc 2.27 (./packages.nix). The variants are redistributable:
# the build step runs the post-build checks with the default policy
# (--redistributable), nothing of the build machine is read (no /usr, no
# host Python, no impure variables), and outputs may come from a binary cache.
#
# Offered: the plan's Linux variants of build sets whose backend nixpkgs
# packages (matrix.json: hermetic.toolkits.<backend>.offered) and whose Torch
# wheel is locked (kernelnix/data/wheel-lock.json), except tvm-ffi; the others
# with the reason (`notOffered`). Deciding that reads data only: `nix eval
# .#variants` imports no nixpkgs.
#
# Interface: see ../host/default.nix.
{ util, hermetic, ... }:
{
  path,
  plan,
  nixpkgs ? null,
  overlays ? [ ],
  # kernel-builder's arguments (`ps: [ ... ]`, nixpkgs' Python packages):
  # added to the Python, and to PATH, of ci-test and the shells.
  pythonCheckInputs ? (ps: [ ]),
  pythonNativeCheckInputs ? (ps: [ ]),
  # The host toolchain's (its Linux variants against this machine's glibc): this
  # toolchain always builds against its own glibc 2.27.
  hostGlibc ? false,
}:
let
  inherit (hermetic) select;
  # `inputs ? nixpkgs` first: comparing the pinned input with null would fetch it.
  haveNixpkgs = hermetic.hasPinnedNixpkgs || nixpkgs != null;
  needNixpkgs = "kernelnix: toolchain \"hermetic\" needs a nixpkgs input: use kernelnix through its flake (flake.lock pins one), or pass `nixpkgs = inputs.nixpkgs;` to kernelFlake (or use toolchain = \"host\")";
  source = if nixpkgs != null then nixpkgs else hermetic.pinnedNixpkgs;
  pkgsFor = hermetic.pkgsFor {
    nixpkgs = source;
    inherit overlays;
  };

  # A variant's python-depends (its metadata.json's), as nixpkgs Python
  # packages: the build's import check, ci-test and the shells need them.
  dependencyOf =
    variant: name:
    hermetic.pythonDependencies.general.${name}
      or hermetic.pythonDependencies.backends.${variant.backend}.${name}
      or { nix = [ ]; };
  unpackaged =
    variant:
    builtins.filter (name: (dependencyOf variant name).nix == [ ]) variant.metadata.python-depends;
  pythonDependsOf =
    variant: ps:
    map (
      attr:
      ps.${attr}
        or (throw "kernelnix (hermetic toolchain): nixpkgs' Python has no ${attr}, a python-depends of the kernel")
    ) (builtins.concatMap (name: (dependencyOf variant name).nix) variant.metadata.python-depends);

  # The header dependencies (CUTLASS, ...) of the kernels a variant compiles,
  # fetched as kernelnix/data/dependencies.json pins them; the build step finds
  # each through KERNELNIX_DEP_<NAME> (kernelnix.compile.dependencies).
  headerDependsOf =
    variant:
    util.unique (
      builtins.filter (name: hermetic.headerDependencies ? ${name}) (
        builtins.concatMap (kernel: plan.kernels.${kernel}.depends or [ ]) (
          builtins.attrNames variant.compile
        )
      )
    );
  unpinned =
    variant:
    builtins.filter (name: !(hermetic.headerDependencies.${name} ? hermetic)) (
      headerDependsOf variant
    );
  dependencyEnv =
    system: variant:
    builtins.listToAttrs (
      map (
        name:
        let
          pin = hermetic.headerDependencies.${name}.hermetic;
        in
        {
          # kernelnix.compile.dependencies.environment_variable's rule.
          name = "KERNELNIX_DEP_${
            util.toUpper (
              builtins.concatStringsSep "_" (
                builtins.filter builtins.isString (builtins.split "[^A-Za-z0-9]" name)
              )
            )
          }";
          value = "${
            (pkgsFor system).fetchFromGitHub {
              inherit (pin)
                owner
                repo
                tag
                hash
                ;
            }
          }/include";
        }
      ) (headerDependsOf variant)
    );

  entryOf =
    system: variant:
    let
      bs = select.buildSetOf system variant;
    in
    if bs == null then
      throw "kernelnix (hermetic toolchain): no build set of matrix.json gives torch ${variant.torch} with ${variant.backend} on ${system}; run `kernelnix generate`"
    else
      (pkgsFor system).kernelnixHermetic.entries.${select.key bs};

  notOffered =
    system: name: variant:
    if !haveNixpkgs then
      throw needNixpkgs
    else
      let
        bs = select.buildSetOf system variant;
        unpinnedHere = unpinned variant;
        unpackagedHere = unpackaged variant;
      in
      if variant.kind == "tvm-ffi" then
        "the hermetic toolchain does not build tvm-ffi kernels (use the host toolchain)"
      else if bs == null then
        "no build set of matrix.json gives Torch ${variant.torch} with ${variant.backend} on ${system}"
      else if unpinnedHere != [ ] then
        "the hermetic toolchain has no pinned source for ${builtins.concatStringsSep ", " unpinnedHere} (kernelnix/data/dependencies.json: hermetic)"
      else if unpackagedHere != [ ] then
        "nixpkgs has no package for its python-depends ${builtins.concatStringsSep ", " unpackagedHere} (kernelnix/data/python_dependencies.json)"
      else
        select.notOffered system bs;

  variantEnv =
    {
      system,
      name,
      variant,
    }:
    let
      entry = entryOf system variant;
    in
    {
      builder = entry.shell;
      setup = ./setup.sh;
      env =
        entry.env
        // dependencyEnv system variant
        // {
          KERNELNIX_PYTHON = "${entry.pythonEnvWith (pythonDependsOf variant)}/bin/python3";
        };
      # What the derivation was given, for inspection (nix eval) and tests.
      passthru.hermetic = {
        inherit (entry)
          key
          torch
          toolkit
          cc
          glibc
          pythonEnv
          kernelnix
          ;
      };
    };

  # kernel-builder's `pkgs.<variant>`: nixpkgs with kernelnix's overlay, plus
  # the variant's Torch, C/C++ compiler and Python environment (python3:
  # Torch, kernelnix, kernels).
  variantPkgs =
    {
      system,
      name,
      variant,
    }:
    let
      entry = entryOf system variant;
    in
    pkgsFor system
    // {
      inherit (entry) torch cc;
      python3 = entry.pythonEnv;
    };

  # Scripts and shells of a variant use its Python (with Torch, kernelnix,
  # kernels and pytest) and tools.
  envFor =
    variantName:
    let
      system = util.findFirst (s: (plan.variants.${s} or { }) ? ${variantName}) (
        builtins.attrNames plan.variants
      );
    in
    if system == null then
      throw "kernelnix (hermetic toolchain): no variant ${variantName} to take a Python from"
    else
      let
        variant = plan.variants.${system}.${variantName};
        entry = entryOf system variant;
        native = map (p: "${p.bin or p}/bin") (pythonNativeCheckInputs entry.python.pkgs);
        python = entry.pythonEnvWith (ps: pythonDependsOf variant ps ++ pythonCheckInputs ps);
      in
      entry.env
      // dependencyEnv system variant
      // {
        KERNELNIX_PYTHON = "${python}/bin/python3";
        PATH = builtins.concatStringsSep ":" (native ++ [ entry.env.PATH ]);
        hostEnv = ./env.sh;
      };
in
{
  name = "hermetic";
  redistributable = true;
  inherit notOffered variantEnv variantPkgs;
  buildTools =
    system:
    let
      pkgs = pkgsFor system;
    in
    {
      shell = "${pkgs.bash}/bin/bash";
      bash = "${pkgs.bash}/bin/bash";
      path = "${pkgs.coreutils}/bin";
    };
  # kernelnix's other steps (the plan, CARD.md): kernelnix without Torch.
  stepEnv =
    system:
    let
      pkgs = pkgsFor system;
      python = pkgs.kernelnixHermetic.python.withPackages (ps: [ (ps.toPythonModule pkgs.kernelnix) ]);
    in
    {
      builder = "${pkgs.bash}/bin/bash";
      setup = ./setup.sh;
      env = {
        KERNELNIX_PYTHON = "${python}/bin/python3";
        PATH = "${pkgs.coreutils}/bin";
      };
    };
  scriptEnvFor = envFor;
  shellEnvFor = envFor;
  scriptEnv = throw "kernelnix (hermetic toolchain): scripts take the environment of a variant (scriptEnvFor)";
  shellEnv = throw "kernelnix (hermetic toolchain): shells take the environment of a variant (shellEnvFor)";
}
