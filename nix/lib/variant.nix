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
  # Object by object (docs/distributed.md): null, or { units; sourceFor; archsOf; }:
  # the sources the variant compiles and, for each, the filtered source its
  # compile reads (./sources.nix forObject) and its GPU archs. Each becomes a derivation of its
  # own, after one configure derivation; the variant derivation links them.
  objectBuild ? null,
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
  # What every step of the variant's build gets: the toolchain's inputs, the
  # plan, and the settings of its compiles.
  stepOf =
    attributes:
    builtins.derivation (
      inputs.env
      // {
        inherit system planFile uniqueId;
        builder = inputs.builder;
        args = [ ./build-variant.sh ];
        toolchainSetup = inputs.setup;
        variant = name;
        targetSystem = variant.system;
        toolchainName = toolchain.name;
        # Redistributable builds meet the default check policy (--redistributable).
        redistributable = if inputs.redistributable or toolchain.redistributable then "1" else "";
      }
      // (if compilerCache == null then { } else { KERNELNIX_COMPILER_CACHE = compilerCache; })
      // (if maxNvccJobs == null then { } else { KERNELNIX_MAX_NVCC_JOBS = toString maxNvccJobs; })
      // attributes
    );
  # The configured CMake tree, from the sources' names (the plan's): an edit
  # to a source configures nothing again.
  configured = stepOf {
    name = "${plan.python-name}-${name}-configured";
    kernelnixStep = "configure";
  };
  objectOf =
    unit:
    stepOf {
      name = "${plan.python-name}-${name}-${util.storeName (baseNameOf unit)}.o";
      kernelnixStep = "object";
      inherit configured;
      objectSource = unit;
      # The GPU archs of the kernels that list the source, which `kernelnix build`
      # names a GPU object by as it finishes (docs/distributed.md).
      objectArchs = builtins.concatStringsSep " " (objectBuild.archsOf unit);
      src = objectBuild.sourceFor unit;
      # An object holds no store path, as the variant does not.
      allowedReferences = [ ];
    };
  objects = map objectOf objectBuild.units;
in
stepOf (
  {
    inherit src kernelGit;
    name = "${plan.python-name}-${name}";
    # A variant refers to nothing in the store: a path that leaks into the library
    # (__FILE__ of a header, an RPATH) would keep its whole Torch environment alive
    # and travel with every copy of the bundle. Nix fails the build instead.
    allowedReferences = [ ];
  }
  # Only when set, so that the defaults change no derivation.
  // (if importCheck then { } else { noImportCheck = "1"; })
  // (if kernelDeps == null then { } else { inherit (kernelDeps) localKernels; })
  // (
    if objectBuild == null then
      { }
    else
      {
        inherit configured objects;
        # Read from a file: hundreds of store paths.
        passAsFile = [ "objects" ];
      }
  )
)
// (inputs.passthru or { })
// {
  # Its kernel dependencies' folders as LOCAL_KERNELS entries ("" when none):
  # ci-test and the test shell load the variant with them.
  localKernels = if kernelDeps == null then "" else kernelDeps.localKernels;
}
