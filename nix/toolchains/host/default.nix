# The host toolchain: this machine's compilers and Python. Impure (needs
# `sandbox = false`), offers only the variants this machine can build. Its Linux
# variants are built for publishing (`--redistributable`): against the glibc
# 2.27 target assembled from a locked wheel (./glibc.nix), with a private C++
# runtime; `hostGlibc = true` builds them against this machine's glibc, for this
# machine only (not redistributable). A variant whose wheels
# are locked (kernelnix/data/wheel-lock.json, `host`) builds against its own
# Torch and CUDA toolkit from them (wheels.nix); the others against the Torch
# of the Python environment that has torch.
#
# What this machine can build comes from kernelnix-host.json next to flake.nix,
# written by `kernelnix generate` (kernelnix.host.record). Without it, kernelnix
# probes this machine during evaluation (`kernelnix host-record`, below) with the
# python3 that env.sh finds, and offers the CPU variants it can build.
#
# Interface shared by every toolchain (see docs/flake.md), each named in
# matrix.json's `toolchains`:
#   { util, kernelnixSrc, ... } -> { path, plan, pythonCheckInputs, ... } -> {
#     name; redistributable;   # variantEnv may say per variant (`redistributable`)
#     notOffered = system -> name -> variant -> null or string;
#                           # why the toolchain does not build a variant (the
#                           # plan's entry); null when it does
#     variantEnv = { system, name, variant } -> { builder; setup; env; passthru? };
#                           # inputs of the shared variant derivation (nix/lib/variant.nix)
#     stepEnv = system -> { builder; setup; env };
#                           # the same for other kernelnix commands (nix/lib/step.nix):
#                           # the plan when none is committed, the bundle's CARD.md
#     buildTools = system -> { shell; bash; path; };  # the bundle's and scripts'
#                           # builder and PATH; bash: what `nix develop` runs
#     scriptEnv = system -> attrs;  # env of generated scripts run on `system`:
#                           # they source $hostEnv first
#     shellEnv = { system, name, variant } -> attrs;  # env of the dev and test
#                           # shells of a variant (variant null: of none); they
#                           # source $hostEnv first
#     lockDigest = null or { name; digest.sha256; };  # the lock of the
#                           # toolchain's tools, for the build provenance
#   }
# and each variant's passthru has `lockedWheels`: [ { name; url; hash; } ], the
# locked wheels it is built with, and `lockedArchives` (the same shape, `hash`
# of the unpacked tree): the release archives of its header dependencies.
{ util, kernelnixSrc, ... }:
{
  path,
  plan,
  # kernel-builder's check inputs name nixpkgs packages, which this toolchain
  # does not use: the host Python must have them already (docs/flake.md).
  pythonCheckInputs ? null,
  pythonNativeCheckInputs ? null,
  # kernelFlake's hostGlibc: Linux variants against this machine's glibc.
  hostGlibc ? false,
}:
let
  # Unpacking needs a Python, not the record's (any python3 env.sh finds).
  wheels = import ./wheels.nix {
    inherit kernelnixSrc;
    toolEnv = _: {
      hostEnv = ./env.sh;
      torchRequirement = "none";
    };
  };
  glibc = import ./glibc.nix { inherit kernelnixSrc wheels; };
  # build.toml `depends` that give headers (CUTLASS): in a Nix build a locked
  # wheel or the pinned release, never the build Python's (./header-depends.nix).
  headerDepends = import ./header-depends.nix {
    inherit
      util
      kernelnixSrc
      wheels
      plan
      ;
  };
  # Publishable: what the glibc target (or no compiler at all) makes, not a darwin
  # build nor one against this machine's glibc (hostGlibc).
  publishable =
    variant: !hostGlibc && (variant.kind == "noarch" || builtins.match ".*-linux" variant.system != null);
  # The compiled ones of those build against the glibc target.
  usesTarget = variant: publishable variant && variant.kind != "noarch";
  recordFile = path + "/kernelnix-host.json";
  schemaVersions = builtins.fromJSON (builtins.readFile ../../../kernelnix/data/schema-versions.json);
  regenerate = "run `kernelnix generate` to record this machine's toolchain";
  record =
    if !builtins.pathExists recordFile then
      null
    else
      let
        data = builtins.fromJSON (builtins.readFile recordFile);
      in
      if (data.schema-version or null) == schemaVersions.host-record then
        data
      else
        throw "kernelnix: kernelnix-host.json has an unknown schema version; ${regenerate}";

  # Without a record: this machine, probed by `kernelnix host-record` in a
  # derivation (import from derivation) with the python3 that env.sh finds, for
  # the plan's variants. Nix keeps the result until the plan or kernelnix
  # changes: `kernelnix generate` records the machine as it is now.
  probed =
    system:
    let
      # nix/lib/step.nix with this toolchain's step inputs; the toolchain itself
      # cannot be passed, its `notOffered` needs this result.
      step = import ../../lib/step.nix { toolchain.stepEnv = _: hostStep "any"; };
      probe = step {
        inherit system;
        name = "kernelnix-host-record";
        args = [
          "host-record"
          (builtins.toFile "kernelnix-plan.json" (builtins.toJSON plan))
          "--output"
          "${builtins.placeholder "out"}/kernelnix-host.json"
        ];
      };
    in
    builtins.fromJSON (builtins.readFile "${probe}/kernelnix-host.json");

  known = system: if record == null then probed system else record;

  tag = system: (known system).python-tag or null;
  # The variant's locked wheels (wheels.nix) for the build Python's tag, or null;
  # of the noarch variants only a CUDA one has some (this machine's Torch would
  # skip its import check), so the others need no record nor probe.
  lockedEntry =
    system: variant:
    if variant.kind == "noarch" && variant.backend != "cuda" then
      null
    else
      wheels.entry (tag system) variant;

  # A noarch variant is Python files and metadata: offered on every system,
  # record or not (no compiler, and its import check skips what this machine's
  # Torch cannot load). A variant of locked wheels is offered wherever the
  # machine is the variant's system; the others need the build Python's Torch
  # (the record says which fit). Without a record, of those only the CPU
  # variants of the probe: what `ci-test` can then load with the probed Torch
  # is certain.
  notOffered =
    system: name: variant:
    let
      machine = known system;
      hostReason = (machine.not-buildable or { }).${name} or "this machine cannot build it";
    in
    if wheels.dependsMissing system (tag system) variant != null then
      wheels.dependsMissing system (tag system) variant
    else if variant.kind == "noarch" then
      null
    else if machine.system != system then
      "this machine is ${machine.system}"
    else if usesTarget variant && glibc.missing system != null then
      glibc.missing system
    else if lockedEntry system variant != null then
      null
    else if !builtins.elem name machine.variants then
      "${hostReason}, and ${wheels.missing (tag system) variant}"
    else if record == null && variant.backend != "cpu" then
      "without kernelnix-host.json only CPU variants and variants of locked wheels are offered; ${regenerate}"
    else
      null;

  scriptVariables = {
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
    env = scriptVariables // {
      kernelnix = kernelnixSrc;
      inherit torchRequirement;
    }
    // identity null;
  };
  identity = import ./identity.nix { inherit record; };
  # A variant of locked wheels builds in their environment (setup.sh puts it
  # on PYTHONPATH, its nvcc on PATH); the others need the host Python's Torch.
  variantEnv =
    {
      system,
      name,
      variant,
    }:
    let
      found = lockedEntry system variant;
      step = hostStep (
        if found != null then
          "any"
        else if variant.kind == "arch" then
          variant.torch
        else if variant.kind == "noarch" || variant.kind == "tvm-ffi" then
          "none"
        else
          "any"
      );
      locked = wheels.variantVariables system (tag system) variant found;
    in
    step
    // {
      redistributable = publishable variant;
      env =
        step.env
        // locked
        // (if found == null then { } else identity locked.wheelEnv)
        // (if usesTarget variant then { glibcTarget = glibc.target system scriptVariables; } else { })
        // headerDepends.variables system variant;
      passthru = wheels.testVariables system (tag system) variant // {
        lockedWheels =
          wheels.lockedWheels system (tag system) variant found
            (headerDepends.wheelsOf system variant);
        lockedArchives = headerDepends.archivesOf system variant;
      };
    };
in
{
  name = "host";
  redistributable = !hostGlibc;
  inherit notOffered variantEnv;
  # The same machine, whatever the variant: scripts and shells find its Python.
  scriptEnv = _: scriptVariables;
  shellEnv = _: scriptVariables;
  # This machine's compilers: no lock.
  lockDigest = null;
  stepEnv = system: hostStep "any";
  # ci-test prefers what the probed Torch loads: without a record, CPU.
  ciBackendsFirst = if record == null then [ "cpu" ] else [ ];
  buildTools = system: {
    shell = "/bin/sh";
    bash = "/bin/bash";
    path = "/usr/bin:/bin";
  };
}
