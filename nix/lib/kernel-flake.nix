# lib.kernelFlake: the outputs of a kernel project's flake, from its plan
# (kernelnix-plan.json, else computed during evaluation: ./plan.nix).
#
#   kernelnix.lib.kernelFlake { inherit self; path = ./.; }
#
# The outputs of kernel-builder's genKernelFlakeOutputs, for the variants the
# toolchain offers:
# packages.<system>: bundle (= default), one package per variant,
# redistributable.<variant> (redistributable toolchains only),
# backendBundle.<backend>, ci, backendCi.<backend>, ci-test,
# ciTests.<variant or arch variant>, kernels, build-and-copy,
# build-and-upload, variants and archVariants (name lists), pkgs.<variant>
# (the toolchain's package set of the variant, when it has one);
# devShells.<system>: default, test, devShells.<variant or arch variant>,
# testShells.<variant or arch variant>; notOffered.<system>: the variants
# the toolchain leaves out, each with the reason. `nix eval --json .#variants`
# (packages.<system>.variants) builds nothing when the plan is committed.
{
  util,
  toolchains,
  kernelnixSrc,
  matrix,
  defaultToolchain,
  # This kernelnix: { rev; narHash; version; } (rev and narHash null outside a flake).
  kernelnix,
}:
{
  self,
  path ? self.outPath,
  toolchain ? defaultToolchain,
  # Ignored: no toolchain uses nixpkgs any more; flakes written for the
  # nixpkgs-based hermetic toolchain of earlier kernelnix releases pass them.
  nixpkgs ? null,
  overlays ? [ ],
  # kernel-builder's arguments, with its meaning (docs/flake.md):
  # default matrix (kernel-builder's form) -> the build sets to use.
  torchVersions ? null,
  # false: the variant builds skip the import through `kernels`.
  doGetKernelCheck ? true,
  # Opt-in, off by default (docs/distributed.md): a directory shared by the
  # variant builds as ccache's cache (with sandbox = true, also in Nix's
  # extra-sandbox-paths), and at most this many CUDA compiles at once per
  # variant. Unset, `nix build --impure` reads KERNELNIX_COMPILER_CACHE and
  # KERNELNIX_MAX_NVCC_JOBS (pure evaluation reads no environment).
  compilerCache ? null,
  maxNvccJobs ? null,
  # Each compiled variant as one derivation per object (docs/distributed.md):
  # true, false, or null: for the variants that compile at least
  # `objectBuildThreshold` sources (ROCm variants, whose sources are hipified
  # first, never).
  objectBuild ? null,
  objectBuildThreshold ? 16,
  # kernel-builder's `ps: [ ... ]` (nixpkgs' Python packages) of ci-test and the
  # shells; no toolchain has nixpkgs: the host Python must have them.
  pythonCheckInputs ? (ps: [ ]),
  pythonNativeCheckInputs ? (ps: [ ]),
  # true: the host toolchain builds Linux variants against this machine's glibc,
  # not the glibc 2.27 target; for debugging: they load only on machines like
  # this one, and `kernelnix upload` refuses them (docs/build.md).
  hostGlibc ? false,
}:
let
  toolchainFor =
    system:
    if toolchains ? ${toolchain} then
      toolchains.${toolchain} {
        plan = plans.forSystem system;
        inherit
          path
          pythonCheckInputs
          pythonNativeCheckInputs
          hostGlibc
          ;
      }
    else
      throw "kernelnix: unknown toolchain \"${toolchain}\"; use one of: ${builtins.concatStringsSep ", " (builtins.attrNames toolchains)}";
  step = args: import ./step.nix { toolchain = toolchainFor args.system; } args;
  plans = import ./plan.nix { inherit util; inherit (matrix) systems; } {
    inherit path step;
    buildSets = (import ./torch-versions.nix { inherit util matrix; }).buildSets torchVersions;
  };

  fromEnvironment =
    value: name:
    if value != null then
      value
    else if builtins.getEnv name == "" then
      null
    else
      builtins.getEnv name;

  # The commit in each variant's metadata (provenance): the plan's may be older.
  # A dirty tree on Nix older than 2.15 (no dirtyRev) records none.
  kernelGit = self.rev or self.dirtyRev or "";

  # The build provenance of the bundles (kernelnix.publish.provenance): which
  # kernelnix, as the kernel's flake.lock pins it (the locked input whose NAR
  # hash is this kernelnix's; no flake.lock in git: the commit alone).
  lockNodes =
    let
      file = path + "/flake.lock";
    in
    if builtins.pathExists file then (builtins.fromJSON (builtins.readFile file)).nodes or { } else { };
  pinned = util.findFirst (
    node: kernelnix.narHash != null && (node.locked.narHash or null) == kernelnix.narHash
  ) (builtins.attrValues lockNodes);
  lockedUri =
    node:
    let
      locked = node.locked;
      dir = node.original.dir or locked.dir or null;
      withDir = separator: if dir == null then "" else "${separator}dir=${dir}";
    in
    if locked.type == "git" then
      "git+${locked.url}?rev=${locked.rev}${withDir "&"}"
    else if locked.type == "github" then
      "github:${locked.owner}/${locked.repo}/${locked.rev}${withDir "?"}"
    else if locked.type == "path" then
      "path:${locked.path}${withDir "?"}"
    else
      null;
  kernelnixDependency = {
    name = "kernelnix";
    uri = if pinned == null then null else lockedUri pinned;
    digest = util.filterAttrs (_: value: value != null) {
      gitCommit = kernelnix.rev;
      narHash = kernelnix.narHash;
    };
  };
  # The source: its commit (none for a dirty tree on Nix older than 2.15) and,
  # where build.toml names it, its repository (`kernelnix upload` adds git's).
  sourceOf =
    planVariant:
    {
      uri = planVariant.metadata.source or null;
      digest =
        if self ? rev then
          { gitCommit = self.rev; }
        else if self ? dirtyRev then
          { gitCommit = util.removeSuffix "-dirty" self.dirtyRev; }
        else
          { };
      dirty = !(self ? rev);
    };

  perSystem =
    system:
    let
      plan = plans.forSystem system;
      tc = toolchainFor system;
      sources = import ./sources.nix { inherit util; } { inherit path plan; };
      # The unique part of the op namespace, like the reference: the short commit
      # (`-` -> `_`), else the dirty one, which stays put while the tree is edited so
      # the bindings that expand it are not recompiled (docs/flake.md).
      revision = self.shortRev or self.dirtyShortRev or dirtyRevision;
      # Nix older than 2.15 has no dirtyShortRev. A dirty git tree there has the
      # HEAD commit's time (lastModified; `submodules` tells a git source from a
      # path: one, whose lastModified is a file time); with no commit, or not in
      # git, the hash of the filtered sources.
      dirtyRevision =
        if self ? submodules && (self.lastModified or 0) > 0 then
          "${self.lastModifiedDate}-dirty"
        else
          "${builtins.substring 0 7 (baseNameOf "${sources.build}")}-dirty";
      uniqueId = builtins.replaceStrings [ "-" ] [ "_" ] revision;
      mkVariant = import ./variant.nix { inherit util; } {
        inherit plan;
        toolchain = tc;
      };
      systemPlan = plan.systems.${system};
      planVariants = plan.variants.${system};
      # Why the toolchain does not build each variant it leaves out.
      notOffered = util.filterAttrs (name: reason: reason != null) (
        util.genAttrs (map util.checkVariantName systemPlan.variants) (
          name: tc.notOffered system name planVariants.${name}
        )
      );
      offered = builtins.filter (name: !(notOffered ? ${name})) systemPlan.variants;
      variants = util.genAttrs offered (
        name:
        mkVariant {
          inherit system name uniqueId kernelGit;
          variant = planVariants.${name};
          src = sources.build;
          planFile = plans.fileFor system;
          importCheck = doGetKernelCheck;
          compilerCache = fromEnvironment compilerCache "KERNELNIX_COMPILER_CACHE";
          maxNvccJobs = fromEnvironment maxNvccJobs "KERNELNIX_MAX_NVCC_JOBS";
          objectBuild = objectBuildOf planVariants.${name};
        }
      );
      # The sources a variant compiles: its kernels' and the binding's.
      compileUnits =
        variant:
        util.unique (
          builtins.filter sources.isCompileUnit (
            plan.framework-sources.src
            ++ builtins.concatMap (kernel: plan.kernels.${kernel}.src) (
              builtins.attrNames (variant.compile or { })
            )
          )
        );
      objectBuildOf =
        variant:
        let
          units = compileUnits variant;
          possible = variant.kind != "noarch" && variant.backend != "rocm" && units != [ ];
          chosen =
            if objectBuild == null then builtins.length units >= objectBuildThreshold else objectBuild;
        in
        if possible && chosen then
          {
            inherit units;
            sourceFor = sources.forObject;
            archsOf = archsOf variant;
          }
        else
          null;
      # The GPU archs `unit` is compiled for: those of the variant's kernels that
      # list it (none for a CPU source or the binding).
      archsOf =
        variant: unit:
        util.unique (
          builtins.concatMap (
            kernel:
            let
              archs = variant.kernels.${kernel} or null;
            in
            if archs != null && builtins.elem unit plan.kernels.${kernel}.src then archs else [ ]
          ) (builtins.attrNames (variant.compile or { }))
        );
      backendOf = name: planVariants.${name}.backend;
      archName = name: util.archVariantName name planVariants.${name};
      # An attribute per variant name and per arch variant name (kernel-builder's
      # keys; the two differ for noarch and stable-ABI variants).
      byVariantAndArch =
        f:
        util.genAttrs offered f
        // builtins.listToAttrs (
          map (name: {
            name = archName name;
            value = f name;
          }) offered
        );

      tools = tc.buildTools system;
      card =
        if sources.card == null then
          null
        else
          step {
            inherit system;
            name = "${plan.python-name}-card";
            args = [
              "fill-card"
              sources.card
              "${builtins.placeholder "out"}/CARD.md"
            ];
          };
      # A bundle of no variant is an error that says why, never an empty
      # `result`: each variant of this system with its reason, or, when the plan
      # has none here, the systems (and their backends) that it has variants for.
      buildsOn = builtins.filter (other: (plan.variants.${other} or { }) != { }) (
        builtins.attrNames plan.variants
      );
      backendsOn =
        other:
        builtins.concatStringsSep ", " (
          builtins.sort builtins.lessThan (
            util.unique (map (variant: variant.backend) (builtins.attrValues plan.variants.${other}))
          )
        );
      emptyReasons =
        if systemPlan.variants != [ ] then
          builtins.concatStringsSep "" (
            map (
              name: "\n  ${name}: ${notOffered.${name} or "offered, but its build set is not bundled"}"
            ) systemPlan.variants
          )
        else if buildsOn == [ ] then
          " ${plan.name} has no variant on any system${
            builtins.concatStringsSep "" (map (note: "\n  ${note}") (plan.notes or [ ]))
          }"
        else
          " ${plan.name} builds only for ${
            builtins.concatStringsSep ", " (map (other: "${other} (${backendsOn other})") buildsOn)
          }; build it on such a machine";
      # What the flake knows of the build of variants `names`, for their provenance.
      provenanceFacts =
        names:
        builtins.toJSON {
          nix = builtins.nixVersion;
          kernelnix = kernelnixDependency;
          kernelnix-version = kernelnix.version;
          toolchain = tc.name;
          toolchain-lock = tc.lockDigest;
          source = sourceOf planVariants.${builtins.head names};
          variants = util.genAttrs names (name: {
            # The derivation's path as text: the bundle does not depend on it.
            derivation = builtins.unsafeDiscardStringContext variants.${name}.drvPath;
            wheels = variants.${name}.lockedWheels or [ ];
            archives = variants.${name}.lockedArchives or [ ];
          });
        };
      bundleOf =
        name: names:
        if names == [ ] then
          throw "kernelnix: the ${tc.name} toolchain offers no variant of ${plan.name} for the ${name} on ${system}:${emptyReasons}"
        else
          import ./bundle.nix {
            inherit system card step;
            name = "${plan.python-name}-${name}";
            variants = util.genAttrs names (name: variants.${name});
            facts = provenanceFacts names;
            inherit (sources) benchmarks;
          };
      bundleNames = builtins.filter (name: builtins.elem name offered) systemPlan.bundle;
      ofBackend = backend: builtins.filter (name: backendOf name == backend);
      # The offered variants, best first (bundle, then CUDA, ROCm, XPU, Metal,
      # CPU, then newest Torch, then oldest backend version).
      ranked = builtins.filter (name: builtins.elem name offered) systemPlan.ci-order;
      # kernel-builder's `ci`: per backend, its best variant when that one is
      # a bundle variant (non-bundle build sets are never bundled).
      ciOf =
        backend:
        let
          best = builtins.head (ofBackend backend ranked);
        in
        if planVariants.${best}.bundle then [ best ] else [ ];
      ciBackends = util.unique (map backendOf ranked);

      scripts = import ./scripts.nix { inherit util kernelnixSrc; } {
        inherit system plan tools;
        toolchain = tc;
        inherit (sources) tests;
      };
      shells = import ./shells.nix { inherit util kernelnixSrc; } {
        inherit system plan;
        toolchain = tc;
      };
      ciTest = name: scripts.ciTest name variants.${name};
      bundle = bundleOf "bundle" bundleNames;
      buildAndCopy = scripts.buildAndCopy bundle;
      # ci-test's variant (and the default shells'): the best one, of the backends
      # the toolchain names first when it does (the host without a record: CPU,
      # which the probed Torch certainly loads; noarch variants of every backend
      # are offered there too).
      ciRanked =
        let
          first = tc.ciBackendsFirst or [ ];
        in
        builtins.filter (name: builtins.elem (backendOf name) first) ranked
        ++ builtins.filter (name: !(builtins.elem (backendOf name) first)) ranked;
      ciVariant = if ciRanked == [ ] then null else builtins.head ciRanked;
      # ci-test's candidates: the best variant of each backend, in that order, up to
      # the first of the CPU, which runs on any machine; ci-test tests the first
      # whose device this machine has (nix/lib/scripts.nix).
      ciCandidates =
        (builtins.foldl' (
          chosen: name:
          if chosen.done || builtins.elem (backendOf name) chosen.backends then
            chosen
          else
            {
              done = backendOf name == "cpu";
              backends = chosen.backends ++ [ (backendOf name) ];
              names = chosen.names ++ [ name ];
            }
        ) { done = false; backends = [ ]; names = [ ]; } ciRanked).names;
      noVariant =
        what:
        throw "kernelnix: the ${tc.name} toolchain offers no variant of ${plan.name} on ${system}, so there is no ${what}; `kernelnix list-variants` shows the plan's variants";
    in
    {
      packages = variants // {
        inherit bundle;
        default = bundle;
        ciTests = byVariantAndArch ciTest;
        redistributable = if tc.redistributable then variants else { };
        backendBundle = util.genAttrs (util.unique (map backendOf bundleNames)) (
          backend: bundleOf "${backend}-bundle" (ofBackend backend bundleNames)
        );
        ci = bundleOf "ci" (builtins.concatMap ciOf ciBackends);
        backendCi = util.genAttrs ciBackends (backend: bundleOf "${backend}-ci" (ciOf backend));
        ci-test =
          if ciVariant == null then
            noVariant "ci-test"
          else
            scripts.ciTestOf (
              map (name: {
                inherit name;
                variant = variants.${name};
              }) ciCandidates
            );
        kernels = scripts.kernels;
        build-and-copy = buildAndCopy;
        build-and-upload = scripts.buildAndUpload bundle buildAndCopy;
        variants = offered;
        archVariants = util.unique (map archName offered);
        # kernel-builder's package set of each variant (nixpkgs): no toolchain
        # has one.
        pkgs = { };
      };
      # `nix eval --json .#notOffered.<system>`: variant name -> why the toolchain
      # does not build it (kernelnix build --variant prints it).
      inherit notOffered;
      devShells = {
        default = shells.dev (if ciVariant == null then "" else ciVariant);
        test = if ciVariant == null then noVariant "test shell" else shells.test ciVariant variants.${ciVariant};
        devShells = byVariantAndArch shells.dev;
        testShells = byVariantAndArch (name: shells.test name variants.${name});
      };
    };
in
util.eachSystem plans.systems perSystem
