# The host toolchain: this machine's compilers and the Python environment that
# has torch. Impure (needs `sandbox = false`), offers only the variants this
# machine can build, and marks them non-redistributable (`--toolchain host`).
#
# What this machine can build comes from kernelnix-host.json next to flake.nix,
# written by `kernelnix generate` (kernelnix.host.record). Without it, the
# toolchain assumes the CPU variants of the newest Torch in the plan and finds
# python3 at build time (env.sh); a wrong guess fails the build with a
# message that says to run `kernelnix generate`.
#
# Interface shared by every toolchain (see docs/flake.md), each named in
# matrix.json's `toolchains`:
#   { util, kernelnixSrc, hermetic, ... } -> { path, plan, nixpkgs, overlays } -> {
#     name; redistributable;
#     offers = system -> name -> variant -> bool;  # variant: the plan's entry
#     variantEnv = { system, name, variant } -> { builder; setup; env; passthru? };
#                           # inputs of the shared variant derivation (nix/lib/variant.nix)
#     stepEnv = system -> { builder; setup; env };
#                           # the same for other kernelnix commands (nix/lib/step.nix):
#                           # the plan when none is committed, the bundle's CARD.md
#     buildTools = system -> { shell; path; };  # for the bundle and scripts' builders
#     scriptEnv = attrs;    # env of generated scripts: they source $hostEnv first
#     shellEnv = attrs;     # env of dev and test shells
#     (optional) scriptEnvFor, shellEnvFor = variantName -> attrs: per variant
#   }
{ util, kernelnixSrc, ... }:
{
  path,
  plan,
  nixpkgs ? null,
  overlays ? [ ],
  # kernel-builder's check inputs name nixpkgs packages, which this toolchain
  # does not use: the host Python must have them already (docs/flake.md).
  pythonCheckInputs ? null,
  pythonNativeCheckInputs ? null,
}:
let
  recordFile = path + "/kernelnix-host.json";
  regenerate = "run `kernelnix generate` to record this machine's toolchain";
  record =
    if !builtins.pathExists recordFile then
      null
    else
      let
        data = builtins.fromJSON (builtins.readFile recordFile);
      in
      if (data.schema-version or null) == 1 then
        data
      else
        throw "kernelnix: kernelnix-host.json has an unknown schema version; ${regenerate}";

  # Without a record: the CPU variants of the newest Torch in the plan.
  isCpu = v: v.backend == "cpu" && v.kind != "tvm-ffi";
  newestCpuTorch =
    system:
    builtins.foldl' (
      best: v: if best == null || builtins.compareVersions v.torch best > 0 then v.torch else best
    ) null (builtins.filter isCpu (builtins.attrValues plan.variants.${system}));
  guess =
    system: v:
    isCpu v
    && (
      v.kind == "noarch"
      || (v.kind == "stable-abi" && builtins.compareVersions (newestCpuTorch system) v.stable-abi >= 0)
      || v.torch == newestCpuTorch system
    );

  offers =
    system: name: variant:
    if record == null then
      guess system variant
    else
      record.system == system && builtins.elem name record.variants;

  scriptEnv = {
    hostEnv = ./env.sh;
    hostPython = if record == null then "" else record.python;
    hostPath = if record == null then "" else builtins.concatStringsSep ":" record.path;
  };

  # The shared variant derivation and kernelnix's other steps run setup.sh:
  # this machine's Python (env.sh), the Torch check, kernelnix's source on
  # PYTHONPATH.
  hostStep = torchRequirement: {
    builder = "/bin/sh";
    setup = ./setup.sh;
    env = scriptEnv // {
      kernelnix = kernelnixSrc;
      inherit torchRequirement;
      preferLocalBuild = true;
      allowSubstitutes = false;
    };
  };
  variantEnv =
    {
      system,
      name,
      variant,
    }:
    hostStep (if variant.kind == "arch" || variant.kind == "tvm-ffi" then variant.torch else "any");
in
{
  name = "host";
  redistributable = false;
  inherit
    offers
    variantEnv
    scriptEnv
    ;
  stepEnv = system: hostStep "any";
  buildTools = system: {
    shell = "/bin/sh";
    path = "/usr/bin:/bin";
  };
  shellEnv = scriptEnv;
}
