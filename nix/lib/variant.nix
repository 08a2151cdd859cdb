# One variant derivation, the same for every toolchain: the Python build step
# (`python -m kernelnix build-variant`, what `kernelnix build --local` runs)
# on the filtered kernel source, into $out/<variant>/. A toolchain supplies
# only inputs and environment, through `variantEnv { system, name, variant }`:
#
#   builder   the shell that runs ./build-variant.sh
#   setup     a script it sources first: sets KERNELNIX_PYTHON (the Python
#             with Torch and kernelnix) and anything else not in `env`
#   env       the derivation's other variables (PATH, compilers, toolkits)
#   passthru  attributes added to the result, not to the derivation
#   redistributable  (optional) this variant's, else the toolchain's
{ util }:
{ plan, toolchain }:
{
  system,
  name,
  variant,
  src,
  # The plan the build step reads (kernelnix-plan.json, or the computed one).
  planFile,
  uniqueId,
  kernelGit,
  # kernel-builder's doGetKernelCheck = false: no import through `kernels`.
  importCheck ? true,
  # Opt-in (kernelFlake's compilerCache, maxNvccJobs): a ccache directory shared
  # by builds, and at most this many CUDA compiles at once. null: off.
  compilerCache ? null,
  maxNvccJobs ? null,
}:
let
  inputs = toolchain.variantEnv { inherit system name variant; };
  kernelDeps =
    if variant ? kernel-deps then
      import ./kernel-deps.nix {
        inherit system name;
        tools = toolchain.buildTools system;
        kernelDeps = variant.kernel-deps;
      }
    else
      null;
in
builtins.derivation (
  inputs.env
  // {
    inherit
      system
      src
      planFile
      uniqueId
      kernelGit
      ;
    name = "${plan.python-name}-${name}";
    builder = inputs.builder;
    args = [ ./build-variant.sh ];
    toolchainSetup = inputs.setup;
    variant = name;
    targetSystem = variant.system;
    toolchainName = toolchain.name;
    # Redistributable builds meet the default check policy (--redistributable).
    redistributable = if inputs.redistributable or toolchain.redistributable then "1" else "";
    # A variant refers to nothing in the store: a path that leaks into the library
    # (__FILE__ of a header, an RPATH) would keep its whole Torch environment alive
    # and travel with every copy of the bundle. Nix fails the build instead.
    allowedReferences = [ ];
  }
  # Only when set, so that the defaults change no derivation.
  // (if importCheck then { } else { noImportCheck = "1"; })
  // (if compilerCache == null then { } else { KERNELNIX_COMPILER_CACHE = compilerCache; })
  // (if maxNvccJobs == null then { } else { KERNELNIX_MAX_NVCC_JOBS = toString maxNvccJobs; })
  // (if kernelDeps == null then { } else { inherit (kernelDeps) localKernels; })
)
// (inputs.passthru or { })
// {
  # Its kernel dependencies' folders as LOCAL_KERNELS entries ("" when none):
  # ci-test and the test shell load the variant with them.
  localKernels = if kernelDeps == null then "" else kernelDeps.localKernels;
}
