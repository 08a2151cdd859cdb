# The hermetic toolchain: every tool from locked registry artifacts
# (nix/registry/: a static busybox, Debian's gcc 12 and binutils, cmake, ninja,
# Python 3.11 with kernelnix's dependency wheels, the glibc 2.27 sysroot), and
# each variant's own Torch (and CUDA toolkit) from the locked wheels, exactly as
# the host toolchain gets them (../host/wheels.nix). No nixpkgs and nothing of
# the build machine: every derivation has a store path as its builder and only
# store paths on PATH, so it builds with `sandbox = true`, and the variants
# are redistributable (the build step holds them to the default policy).
#
# Offered: the plan's Linux variants of the systems the registry has tools for
# whose wheels are locked for its Python (`cp311`), and noarch variants; the
# others with the reason (`notOffered`). Deciding that reads data only.
#
# Interface: see ../host/default.nix.
#
# What it takes of the registry, `import ../../registry { inherit kernelnixSrc; }`:
#   shell         a store path that runs as `sh` (busybox): every builder
#   python.tag    the wheel tag of its Python (`cp311`): the lock's environments
#   systems.<system> = {
#     python      its Python 3.11, with kernelnix's dependency wheels and its
#                 headers (Python.h), as a store path of the program
#     path        store paths of folders of programs: busybox's applets, gcc and
#                 binutils, cmake, ninja (with a store shell, not /bin/sh)
#     cc, cxx     gcc and g++, usable without --sysroot too (CMake's compiler
#                 checks: libc and kernel headers, crt files, libraries)
#     loader, libraries, patchelf
#                 ld-linux, the folder of its C and C++ runtime, patchelf: for
#                 the wheels' programs and Torch's libraries
#     glibcTarget the glibc 2.27 sysroot (kernelnix-glibc-target.json)
#     bash        a static bash: the builder of the `nix develop` shells
#     pythonCommands  a folder of `python3` and `python` (the shells' Python)
#   }
{ util, kernelnixSrc, ... }:
{
  path,
  plan,
  # kernel-builder's check inputs name nixpkgs packages, which this toolchain
  # does not have: ci-test and the shells take the variant's locked wheels.
  pythonCheckInputs ? null,
  pythonNativeCheckInputs ? null,
  # The host toolchain's (its Linux variants against this machine's glibc): this
  # toolchain always builds against the registry's glibc 2.27 sysroot.
  hostGlibc ? false,
}:
let
  registry =
    if builtins.pathExists ../../registry/default.nix then
      import ../../registry { inherit kernelnixSrc; }
    else
      throw "kernelnix (hermetic toolchain): this kernelnix has no nix/registry/ (the toolchain's tools); use toolchain = \"host\"";
  # The Python tag of the registry's Python: the lock's environments to take.
  tag = registry.python.tag;
  # The wheels' programs (nvcc, cicc, ptxas) get a loader and C library in the
  # store (./patch-interpreters.sh): the sandbox has no /lib64/ld-linux-*.
  wheels = import ../host/wheels.nix {
    inherit kernelnixSrc;
    toolEnv = scriptEnvOf;
    shellFor = system: (tools system).shell;
    afterUnpack = ''. "$patchInterpreters"'';
  };

  has = system: registry.systems ? ${system};
  tools = system: registry.systems.${system};

  # What every builder of the toolchain gets (env.sh reads it): its Python and
  # a PATH of store paths; the wheels' unpacking also the ELF patcher.
  scriptEnvOf =
    system:
    let
      t = tools system;
    in
    {
      hostEnv = ./env.sh;
      hermeticPython = t.python;
      hermeticPath = builtins.concatStringsSep ":" t.path;
      patchInterpreters = ./patch-interpreters.sh;
      inherit (t) loader libraries patchelf;
    };

  # build.toml `depends` that give headers (CUTLASS): a locked wheel or the
  # pinned release (../host/header-depends.nix).
  headerDepends = import ../host/header-depends.nix {
    inherit
      util
      kernelnixSrc
      wheels
      plan
      ;
  };

  # nvcc's steps through the store shell, not /bin/sh (./system-shell.c).
  systemShell =
    system:
    builtins.derivation {
      inherit system;
      name = "kernelnix-system-shell.so";
      builder = (tools system).shell;
      args = [
        "-c"
        ''"$cc" -O2 -fPIC -shared -DKERNELNIX_SHELL="\"$shell\"" -o "$out" "$src"''
      ];
      cc = (tools system).cc;
      shell = (tools system).shell;
      src = ./system-shell.c;
      PATH = (scriptEnvOf system).hermeticPath;
    };

  # A noarch variant of a backend the lock chose no build set for builds
  # without Torch (its import check says it skipped); every other variant needs
  # its locked wheels.
  needsWheels = variant: variant.kind != "noarch";

  notOffered =
    system: name: variant:
    if builtins.match ".*-linux" variant.system == null then
      "the hermetic toolchain builds Linux variants only (use the host toolchain)"
    else if !(has system) then
      "the hermetic toolchain's registry has no tools for ${system} (it has ${
        builtins.concatStringsSep ", " (builtins.attrNames registry.systems)
      })"
    else if wheels.dependsMissing system tag variant != null then
      wheels.dependsMissing system tag variant
    else if needsWheels variant && wheels.entry tag variant == null then
      wheels.missing tag variant
    else
      null;

  # The shared variant derivation (nix/lib/variant.nix) and kernelnix's other
  # steps run ../host/setup.sh: the variant's wheels on PYTHONPATH (its nvcc on
  # PATH) with kernelnix's source, the toolchain's Python and PATH (env.sh).
  stepOf = system: torchRequirement: {
    builder = (tools system).shell;
    setup = ../host/setup.sh;
    env = scriptEnvOf system // {
      kernelnix = kernelnixSrc;
      inherit torchRequirement;
      # Whatever the build machine's clock says, and for every file time.
      SOURCE_DATE_EPOCH = "315532800";
    };
  };

  variantEnv =
    {
      system,
      name,
      variant,
    }:
    let
      t = tools system;
      found = wheels.entry tag variant;
      step = stepOf system (if found == null then "none" else "any");
    in
    step
    // {
      env =
        step.env
        // wheels.variantVariables system tag variant found
        // {
          CC = t.cc;
          CXX = t.cxx;
          # nvcc's host compiler.
          CUDAHOSTCXX = t.cxx;
        }
        // (if variant.kind == "noarch" then { } else { glibcTarget = t.glibcTarget; })
        // (if variant.backend == "cuda" then { LD_PRELOAD = systemShell system; } else { })
        // headerDepends.variables system variant;
      passthru = wheels.testVariables system tag variant // {
        lockedWheels = wheels.lockedWheels system tag variant found (headerDepends.wheelsOf system variant);
        lockedArchives = headerDepends.archivesOf system variant;
      };
    };

  # The dev and test shells (`nix develop`), which run on the user's machine: the
  # registry's tools and `python3`, and the variant's Torch, python-depends and
  # nvcc, as its build has them (./shell-env.sh); its compilers in CC and CXX.
  shellEnv =
    {
      system,
      name,
      variant,
    }:
    let
      t = tools system;
    in
    scriptEnvOf system
    // {
      hostEnv = ./shell-env.sh;
      inherit (t) pythonCommands;
      CC = t.cc;
      CXX = t.cxx;
      CUDAHOSTCXX = t.cxx;
    }
    // (
      if variant == null then
        { }
      else
        wheels.variantVariables system tag variant (wheels.entry tag variant)
        // headerDepends.variables system variant
    );
in
{
  name = "hermetic";
  redistributable = true;
  inherit notOffered variantEnv;
  buildTools =
    system:
    let
      t = tools system;
    in
    {
      shell = t.shell;
      bash = t.bash;
      path = builtins.concatStringsSep ":" t.path;
    };
  # kernelnix's other steps (the plan, CARD.md): kernelnix without Torch.
  stepEnv = system: stepOf system "none";
  # Scripts take the tools of the system that runs them: a noarch variant is the
  # same on every system, and its scripts must never take another system's.
  scriptEnv = scriptEnvOf;
  inherit shellEnv;
  # The lock its tools come from, for the build provenance: its path in
  # kernelnix and its sha256.
  lockDigest = {
    name = "kernelnix/data/toolchain-lock.json";
    digest.sha256 = builtins.hashFile "sha256" (kernelnixSrc + "/kernelnix/data/toolchain-lock.json");
  };
}
