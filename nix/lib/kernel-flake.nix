# lib.kernelFlake: the outputs of a kernel project's flake, from its plan.
#
#   kernelnix.lib.kernelFlake { inherit self; path = ./.; }
#
# packages.<system>: bundle (= default), one package per variant the toolchain
# offers, redistributable.<variant> (redistributable toolchains only),
# ci-test, ciTests.<variant>, build-and-copy, build-and-upload;
# devShells.<system>: default, test, devShells.<variant>, testShells.<variant>;
# variants.<system>: the variant names (plan and toolchain only: evaluating
# them builds nothing).
{ util, toolchains, kernelnixSrc }:
{
  self,
  path ? self.outPath,
  toolchain ? "host",
  # The hermetic toolchain's nixpkgs: null takes the one kernelnix pins.
  nixpkgs ? null,
  # Extra nixpkgs overlays for the hermetic toolchain (e.g. a toolkit
  # nixpkgs lacks); the host toolchain ignores them.
  overlays ? [ ],
}:
let
  plan = import ./plan.nix { inherit util path; };
  sources = import ./sources.nix { inherit util; } { inherit path plan; };
  tc =
    if toolchains ? ${toolchain} then
      toolchains.${toolchain} { inherit path plan nixpkgs overlays; }
    else
      throw "kernelnix: unknown toolchain \"${toolchain}\"; use one of: ${builtins.concatStringsSep ", " (builtins.attrNames toolchains)}";

  # The unique part of the op namespace, like the reference: the short commit
  # (`-` -> `_`), else the dirty one; Nix older than 2.15 has no dirtyShortRev,
  # so a dirty tree then uses the hash of the filtered sources.
  revision =
    self.shortRev or self.dirtyShortRev or "${builtins.substring 0 7 (baseNameOf "${sources.build}")}-dirty";
  uniqueId = builtins.replaceStrings [ "-" ] [ "_" ] revision;
  # The commit in each variant's metadata (provenance): the plan's may be older.
  # A dirty tree on Nix older than 2.15 (no dirtyRev) records none.
  kernelGit = self.rev or self.dirtyRev or "";
  mkVariant = import ./variant.nix { inherit util; } {
    inherit plan;
    toolchain = tc;
  };

  perSystem =
    system:
    let
      systemPlan = plan.systems.${system};
      planVariants = plan.variants.${system};
      offered = builtins.filter (name: tc.offers system name planVariants.${name}) (
        map util.checkVariantName systemPlan.variants
      );
      variants = util.genAttrs offered (
        name:
        mkVariant {
          inherit system name uniqueId kernelGit;
          variant = planVariants.${name};
          src = sources.build;
        }
      );
      bundleNames = builtins.filter (name: builtins.elem name offered) systemPlan.bundle;
      tools = tc.buildTools system;
      bundle = import ./bundle.nix { inherit util; } {
        inherit system tools;
        name = "${plan.python-name}-bundle";
        variants = util.genAttrs bundleNames (name: variants.${name});
        inherit (sources) benchmarks;
      };
      scripts = import ./scripts.nix { inherit util kernelnixSrc; } {
        inherit system plan tools ciVariant;
        toolchain = tc;
        inherit (sources) tests;
      };
      shells = import ./shells.nix { inherit util kernelnixSrc; } {
        inherit system plan;
        toolchain = tc;
      };
      ciTests = builtins.mapAttrs scripts.ciTest variants;
      buildAndCopy = scripts.buildAndCopy bundle;
      ciVariant = util.findFirst (name: variants ? ${name}) systemPlan.ci-order;
      noVariant =
        what:
        throw "kernelnix: the ${tc.name} toolchain offers no variant of ${plan.name} on ${system}, so there is no ${what}; `kernelnix list-variants` shows the plan's variants";
    in
    {
      packages =
        variants
        // {
          inherit bundle ciTests;
          default = bundle;
          redistributable = if tc.redistributable then variants else { };
          ci-test = if ciVariant == null then noVariant "ci-test" else ciTests.${ciVariant};
          build-and-copy = buildAndCopy;
          build-and-upload = scripts.buildAndUpload buildAndCopy;
        };
      devShells = {
        default = shells.dev (if ciVariant == null then "" else ciVariant);
        test = if ciVariant == null then noVariant "test shell" else shells.test ciVariant variants.${ciVariant};
        devShells = util.genAttrs offered shells.dev;
        testShells = builtins.mapAttrs shells.test variants;
      };
      variants = offered;
    };
in
util.eachSystem (builtins.attrNames plan.systems) perSystem
