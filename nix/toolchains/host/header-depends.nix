# Where a Nix build of a variant gets the headers of its kernels' header
# dependencies (build.toml `depends`: CUTLASS), the same for both toolchains:
#
#   1. the dependency's locked wheel (the lock's `header-depends`, written by
#      `kernelnix lock-wheels --only header-depends`: PyPI's nvidia-cutlass),
#      unpacked by ./wheels.nix;
#   2. else the release kernelnix/data/dependencies.json pins (`release`: the
#      GitHub tag's archive, and the hash of its unpacked tree, the one
#      kernel-builder's fetchFromGitHub pins), fetched by a fixed-output
#      derivation (./wheels.nix fetchedRelease): evaluation downloads nothing,
#      and a store or binary cache that holds the tree supplies it.
#
# The build step finds it in KERNELNIX_DEP_<NAME> (kernelnix.compile.dependencies),
# which points at its include directory; a build outside Nix (`kernelnix build
# --local`) takes the machine's instead.
{
  util,
  kernelnixSrc,
  wheels,
  plan,
}:
let
  known =
    (builtins.fromJSON (builtins.readFile (kernelnixSrc + "/kernelnix/data/dependencies.json"))).dependencies;
  dependsOf =
    variant:
    util.unique (
      builtins.filter (name: known ? ${name}) (
        builtins.concatMap (kernel: plan.kernels.${kernel}.depends or [ ]) (
          builtins.attrNames (variant.compile or { })
        )
      )
    );
  archiveOf = release: {
    name = "${release.repo}-${release.tag}.tar.gz";
    inherit (release) url hash;
  };
  # Each header dependency of a variant: its name, include directory, and the
  # locked wheel or the release archive it comes from (one of them null).
  sourcesOf =
    system: variant:
    map (
      entry:
      let
        dependency = known.${entry.name};
        archive = archiveOf dependency.release;
        root =
          if entry.wheel != null then
            "${wheels.unpacked system entry.wheel}/${dependency.python-package}/${dependency.python-include}"
          else
            "${wheels.fetchedRelease system archive}/${dependency.release.include}";
      in
      {
        inherit (entry) name wheel;
        archive = if entry.wheel == null then archive else null;
        include = root;
      }
    ) (wheels.headerEntries system (dependsOf variant));
in
{
  # KERNELNIX_DEP_<NAME> of each: only where the variant has some, so that the
  # others' derivations stay as they were.
  variables =
    system: variant:
    builtins.listToAttrs (
      map (source: {
        name = "KERNELNIX_DEP_${util.toUpper source.name}";
        value = source.include;
      }) (sourcesOf system variant)
    );
  # The locked wheels among them (the variant's `lockedWheels` lists them).
  wheelsOf =
    system: variant:
    map (source: source.wheel) (builtins.filter (source: source.wheel != null) (sourcesOf system variant));
  # The release archives among them: { name; url; hash; } (`hash`: of the
  # unpacked tree), for the build provenance.
  archivesOf =
    system: variant:
    map (source: source.archive) (builtins.filter (source: source.archive != null) (sourcesOf system variant));
}
