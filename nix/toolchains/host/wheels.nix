# The host toolchain's locked wheels (kernelnix/data/wheel-lock.json, `host`,
# written by `kernelnix lock-wheels`): a variant builds against its own Torch
# and CUDA toolkit, never the build Python's.
#
# Each wheel is a fixed-output download (Nix's builtin fetchurl, URL and hash
# from the lock: no nixpkgs), unpacked once into a store path of its own; a
# build set's environment is a store path of links to those
# (kernelnix/host/wheel_tree.py, the code `kernelnix build --local` runs too).
# A wheel shared by several build sets lives in the store once.
#
# The hermetic toolchain (../hermetic) takes its variants' wheels from here too,
# with its own shell for the builders (`shellFor system`) and, after unpacking, `afterUnpack`:
# shell code run on "$out" (its programs pointed at a loader in the store).
#
# `toolEnv system` is the environment of these derivations (their $hostEnv finds
# a Python). It is the same for every variant and every record of the machine:
# a wheel is unpacked once whatever PATH a build ran with, where a host record's
# PATH in it unpacked each Torch and CUDA toolkit again (gigabytes each).
{
  kernelnixSrc,
  toolEnv,
  shellFor ? (_: "/bin/sh"),
  afterUnpack ? null,
}:
let
  lockFile = builtins.fromJSON (builtins.readFile (kernelnixSrc + "/kernelnix/data/wheel-lock.json"));
  lock = lockFile.host or { };
  # The script alone: changing the rest of kernelnix unpacks nothing again.
  tool = builtins.path {
    path = kernelnixSrc + "/kernelnix/host/wheel_tree.py";
    name = "wheel_tree.py";
  };
  stem = name: builtins.substring 0 (builtins.stringLength name - 4) name;

  fetched =
    name:
    import <nix/fetchurl.nix> {
      inherit (lock.wheels.${name}) url hash;
      inherit name;
    };

  # Unpacked with the toolchain's Python ($hostEnv finds it, as for every step).
  unpacked =
    system: name:
    builtins.derivation (
      toolEnv system
      // {
        inherit system tool;
        name = "wheel-${stem name}";
        src = fetched name;
        builder = shellFor system;
        args = [
          "-c"
          (
            if afterUnpack == null then
              ''. "$hostEnv" && exec "$KERNELNIX_PYTHON" "$tool" unpack "$src" "$out"''
            else
              ''. "$hostEnv" && "$KERNELNIX_PYTHON" "$tool" unpack "$src" "$out" && ${afterUnpack}''
          )
        ];
      }
    );
  releaseScript = builtins.path {
    path = kernelnixSrc + "/kernelnix/host/release_archive.py";
    name = "release_archive.py";
  };
in
rec {
  inherit unpacked;

  # A release archive (`release`: { url; hash; }, hash of the unpacked tree)
  # fetched and unpacked by a fixed-output derivation. Named `source`, as
  # nixpkgs' fetchFromGitHub names it: the same hash gives the same store path,
  # which a binary cache, or a store that fetched it before, supplies.
  fetchedRelease =
    system: release:
    builtins.derivation (
      toolEnv system
      // {
        inherit system releaseScript;
        inherit (release) url;
        name = "source";
        builder = shellFor system;
        args = [
          "-c"
          ''. "$hostEnv" && exec "$KERNELNIX_PYTHON" "$releaseScript" "$url" "$out"''
        ];
        outputHashMode = "recursive";
        outputHash = release.hash;
        # A download, as Nix's own fetchurl: fetched where the build is asked for,
        # not by a remote builder.
        preferLocalBuild = true;
      }
    );

  # `2.13-cuda-13`, `2.15-cuda-13.2`: the lock's name of a variant's build set
  # (kernelnix.host.environments.build_set_key).
  buildSetKey =
    variant:
    "${variant.torch}-${variant.backend}"
    + (if (variant.backend-version or null) != null then "-${variant.backend-version}" else "");

  # The lock's build set of a variant for a Python tag (`cp311`): a compiled
  # variant's own, or for a noarch one of a backend the lock chose a build set
  # for (`noarch`: a CUDA noarch variant loads in a CUDA Torch) that one; null for
  # others (kernelnix.host.environments.locked_environment).
  entryKey =
    tag: variant:
    if tag == null then
      null
    else if variant.kind == "tvm-ffi" then
      "tvm-ffi-${variant.tvm-ffi}-${variant.backend}"
      + (if (variant.backend-version or null) != null then "-${variant.backend-version}" else "")
    else if variant.kind == "noarch" then
      (((lock.noarch or { }).${variant.system} or { }).${tag} or { }).${variant.backend} or null
    else
      buildSetKey variant;

  # The lock's entry of that build set, or null.
  entry =
    tag: variant:
    let
      key = entryKey tag variant;
    in
    if key == null then
      null
    else if variant.kind == "tvm-ffi" then
      tvmFfiEntry tag variant
    else
      buildSetEntry variant.system tag key;

  # The lock's environment of a build set (`2.12-cuda-13`) for a system and tag, or null.
  buildSetEntry = system: tag: key: ((lock.environments or { }).${system} or { }).${tag}.${key} or null;

  # A tvm-ffi variant builds against apache-tvm-ffi, not Torch: the lock's
  # python-depends `tvm-ffi` wheels, for CUDA with the toolkit of the build set
  # of the Torch entry the variant comes from; CPU and CUDA only, or null
  # (kernelnix.host.environments.locked_environment).
  tvmFfiEntry =
    tag: variant:
    let
      framework = tvmFfiWheels tag variant;
      cpu = variant.backend == "cpu";
      buildSet = buildSetEntry variant.system tag (buildSetKey variant);
    in
    if framework == null || !(builtins.elem variant.backend tvmFfiBackends) || (!cpu && buildSet == null) then
      null
    else
      {
        wheels = framework;
        toolkit = if cpu then [ ] else buildSet.toolkit;
        torch = "";
      };
  # The lock's apache-tvm-ffi wheels (and what they require) for a tag, or null.
  tvmFfiWheels =
    tag: variant:
    (((lock.python-depends or { }).${variant.system} or { }).${tag} or { }).tvm-ffi.wheels or null;
  # kernelnix.host.machine.TVM_FFI_BACKENDS.
  tvmFfiBackends = [
    "cpu"
    "cuda"
  ];

  # Why the lock has no entry for a variant (as kernelnix.host.environments.not_locked_reason).
  missing =
    tag: variant:
    let
      system = variant.system;
      tags = (lock.environments or { }).${system} or { };
      recorded = (((lock.missing or { }).${system} or { }).${tag} or { }).${buildSetKey variant} or null;
    in
    if variant.kind == "noarch" then
      "no wheels are locked for noarch variants"
    else if tag == null then
      "kernelnix-host.json records no Python tag to choose locked wheels by; run `kernelnix generate`"
    else if variant.kind == "tvm-ffi" then
      tvmFfiMissing tag variant
    else if recorded != null then
      recorded
    else if !(tags ? ${tag}) then
      "the wheel lock has no environments for ${tag} (this Python) on ${system}; run `kernelnix lock-wheels --python ${tag}`"
    else
      "the wheel lock has no ${buildSetKey variant} environment for ${tag} on ${system}";

  # Why a tvm-ffi variant has no entry (kernelnix.host.environments.not_locked_reason).
  tvmFfiMissing =
    tag: variant:
    if !(builtins.elem variant.backend tvmFfiBackends) then
      "kernelnix builds tvm-ffi kernels for ${builtins.concatStringsSep " and " tvmFfiBackends} only, not ${variant.backend} yet"
    else if tvmFfiWheels tag variant == null then
      "the wheel lock holds no python-depends 'tvm-ffi' (apache-tvm-ffi) for ${tag} on ${variant.system}; run `kernelnix lock-wheels`"
    else
      "the wheel lock has no ${buildSetKey variant} environment for ${tag} on ${variant.system} to take the CUDA toolkit from";

  # A variant's python-depends (its metadata's names) for a Python tag: the
  # lock's wheels of them and of what they require, or the names it lacks
  # (kernelnix.host.python_wheels writes `python-depends`; environments.py reads
  # it the same way for `build --local`).
  dependsEntries =
    system: tag: variant:
    let
      names = variant.metadata.python-depends or [ ];
      locked = (((lock.python-depends or { }).${system} or { }).${if tag == null then "" else tag} or { });
    in
    map (name: {
      inherit name;
      wheels = (locked.${name} or { }).wheels or null;
      alternatives = (locked.${name} or { }).alternatives or [ ];
      why = (locked.${name} or { }).missing or "the lock has no python-depends for ${toString tag} on ${system}";
    }) names;
  dependsMissing =
    system: tag: variant:
    let
      missing = builtins.filter (e: e.wheels == null) (dependsEntries system tag variant);
    in
    if missing == [ ] then
      null
    else
      builtins.concatStringsSep "; " (
        map (
          e: "python-depends ${e.name} is not in the wheel lock for ${toString tag}: ${e.why}"
        ) missing
      )
      + "; run `kernelnix lock-wheels`";
  # The wheels of a variant's python-depends, each once, or [ ] (none, or not
  # locked): `release` 0 the lock's first releases of them; 1, 2, ... a name's
  # `alternatives` (its other releases), each name without as many its last
  # (kernelnix.host.environments.each_release picks the same).
  releaseWheels =
    system: tag: variant: release:
    let
      found = builtins.filter (e: e.wheels != null) (dependsEntries system tag variant);
      pick =
        e:
        let
          releases = [ e.wheels ] ++ e.alternatives;
          count = builtins.length releases;
        in
        builtins.elemAt releases (if release < count then release else count - 1);
    in
    builtins.foldl' (acc: e: acc ++ builtins.filter (w: !builtins.elem w acc) (pick e)) [ ] found;
  dependsWheels = system: tag: variant: releaseWheels system tag variant 0;
  # The wheels of each further release of a variant's python-depends, in the
  # order the import check tries them where the variant fails to load with the
  # first (kernelnix.checks.import_check), or [ ].
  dependsAlternatives =
    system: tag: variant:
    let
      counts = map (e: builtins.length e.alternatives) (
        builtins.filter (e: e.wheels != null) (dependsEntries system tag variant)
      );
      most = builtins.foldl' (a: b: if b > a then b else a) 0 counts;
    in
    builtins.genList (i: releaseWheels system tag variant (i + 1)) most;

  # The locked wheels of header dependencies (build.toml `depends`: CUTLASS) for
  # a system, from the lock's `header-depends` (kernelnix.host.header_wheels): per
  # name its wheel, or null (./header-depends.nix then takes its release).
  headerEntries =
    system: names:
    map (name: {
      inherit name;
      wheel = (((lock.header-depends or { }).${system} or { }).${name} or { }).wheel or null;
    }) names;

  # Unpacked wheels merged into one store path of links: a PYTHONPATH entry.
  merged =
    system: name: names: extra:
    builtins.derivation (
      toolEnv system
      // extra
      // {
        inherit system tool name;
        wheels = map (unpacked system) names;
        builder = shellFor system;
        args = [
          "-c"
          ''. "$hostEnv" && exec "$KERNELNIX_PYTHON" "$tool" merge "$out" $wheels''
        ];
      }
    );

  # The python-depends' environment of a variant (dependsWheels' names), on
  # PYTHONPATH after its Torch's; `release` 0, or the number of an alternative.
  dependsEnvironment =
    system: release: names:
    merged system (
      "kernelnix-python-depends" + (if release == 0 then "" else "-alternative-${toString release}")
    ) names { };

  # The environment of an entry: one store path, the variant's PYTHONPATH.
  environment =
    system: key: found:
    merged system "kernelnix-env-${key}" (found.wheels ++ (found.toolkit or [ ])) {
      torch = found.torch;
    };

  # What a variant's tests get beyond its build's environment (the result's
  # passthru, never the derivation's): a tvm-ffi variant's kernels_ci tests run
  # its functions on Torch tensors, as kernel-builder's do, in the Torch of the
  # entry the variant comes from (`testEnv`), where the lock holds it.
  testVariables =
    system: tag: variant:
    let
      key = buildSetKey variant;
      torch = if tag == null then null else buildSetEntry system tag key;
    in
    if variant.kind != "tvm-ffi" || torch == null then { } else { testEnv = environment system key torch; };

  # The locked wheels a variant is built with (its Torch and CUDA toolkit,
  # `found`, its python-depends, and `extra`: its header dependencies' wheels),
  # as the wheel lock records them: the build provenance names
  # them (kernelnix.publish.provenance).
  lockedWheels =
    system: tag: variant: found: extra:
    map (name: {
      inherit name;
      inherit (lock.wheels.${name}) url hash;
    }) (
      builtins.foldl' (names: name: if builtins.elem name names then names else names ++ [ name ]) [ ] (
        (if found == null then [ ] else found.wheels ++ (found.toolkit or [ ]))
        ++ dependsWheels system tag variant
        ++ extra
      )
    );

  # What ../host/setup.sh reads of a variant's locked wheels, each only when
  # the lock has it: `wheelEnv`, its Torch and CUDA toolkit (`found`: its entry,
  # or null); `dependsEnv` and `dependsAlternatives`, its python-depends.
  variantVariables =
    system: tag: variant: found:
    let
      depends = dependsWheels system tag variant;
      alternatives = dependsAlternatives system tag variant;
    in
    (if found == null then { } else { wheelEnv = environment system (entryKey tag variant) found; })
    // (if depends == [ ] then { } else { dependsEnv = dependsEnvironment system 0 depends; })
    // (
      if alternatives == [ ] then
        { }
      else
        {
          dependsAlternatives = builtins.genList (
            i: dependsEnvironment system (i + 1) (builtins.elemAt alternatives i)
          ) (builtins.length alternatives);
        }
    );
}
