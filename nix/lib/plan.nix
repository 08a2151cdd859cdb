# The kernel's plan. kernelnix-plan.json (written by `kernelnix generate`) when
# it matches build.toml and the package's Python files and the flake keeps
# kernelnix's matrix; otherwise the plan is computed during evaluation (import
# from derivation): `kernelnix plan` runs on the kernel source in a derivation
# with the toolchain's Python, and its output is read. Nix keeps that output, so
# the plan is computed again only when the source or the build sets change.
{ util, systems }:
{
  path,
  # null: kernelnix's matrix; else the build sets replacing it (torchVersions).
  buildSets,
  # Runs a kernelnix command in a derivation (./step.nix) for a system.
  step,
}:
let
  committedFile = path + "/kernelnix-plan.json";
  buildToml = path + "/build.toml";
  schemaVersion =
    (builtins.fromJSON (builtins.readFile ../../kernelnix/data/schema-versions.json)).plan;
  # The unique id of a plan for Nix (kernelnix.project.generate.NIX_UNIQUE_ID): every
  # variant build replaces it with the flake's revision.
  uniqueId = "flake_rev";
  committed = builtins.fromJSON (builtins.readFile committedFile);

  # The Python files of the package (the plan lists them in `sources`).
  pythonFiles =
    dir:
    builtins.concatLists (
      builtins.attrValues (
        builtins.mapAttrs (
          name: type:
          let
            rel = "${dir}/${name}";
          in
          if type == "directory" then
            (if name == "__pycache__" then [ ] else pythonFiles rel)
          else if builtins.any (ext: util.hasSuffix ".${ext}" name) committed.pyext then
            [ rel ]
          else
            [ ]
        ) (builtins.readDir (path + "/${dir}"))
      )
    );
  packageFiles =
    if builtins.pathExists (path + "/${committed.package-dir}") then
      pythonFiles committed.package-dir
    else
      [ ];
  unlisted = builtins.filter (f: !builtins.elem f committed.sources) packageFiles;
  missing = builtins.filter (f: !builtins.pathExists (path + "/${f}")) committed.sources;

  # The kernel dependencies' files lock (`kernelnix lock`): a plan made with
  # another one (or none) is planned again.
  filesLock = path + "/kernelnix-kernels.json";
  filesLockSha = if builtins.pathExists filesLock then builtins.hashFile "sha256" filesLock else null;
  staleKernelDeps = builtins.any (v: v ? kernel-deps && v.kernel-deps.lock-sha256 != filesLockSha) (
    builtins.concatMap builtins.attrValues (builtins.attrValues committed.variants)
  );

  # Why kernelnix-plan.json cannot be used (null: it can).
  stale =
    if !builtins.pathExists committedFile then
      null
    else if (committed.schema-version or null) != schemaVersion then
      "it has schema version ${toString (committed.schema-version or "none")}, this kernelnix reads ${toString schemaVersion}"
    else if committed.build-toml-sha256 != builtins.hashFile "sha256" buildToml then
      "build.toml changed since it was generated (plan: sha256 ${committed.build-toml-sha256}, build.toml: sha256 ${builtins.hashFile "sha256" buildToml})"
    else if unlisted != [ ] then
      "its sources lack ${builtins.concatStringsSep ", " unlisted}"
    else if missing != [ ] then
      "its sources ${builtins.concatStringsSep ", " missing} do not exist (or git does not track them)"
    else if staleKernelDeps then
      "kernelnix-kernels.json changed since it was generated (run `kernelnix generate` after `kernelnix lock`)"
    else
      null;
  useCommitted = builtins.pathExists committedFile && stale == null && buildSets == null;
  why =
    if !builtins.pathExists committedFile then
      null
    else if stale != null then
      "kernelnix-plan.json is stale: ${stale}"
    else
      "torchVersions changes kernelnix's build sets, so kernelnix-plan.json (made with them) is not used";
  computing =
    value:
    if why == null then
      value
    else
      builtins.trace "kernelnix: ${why}; computing the plan during evaluation (`kernelnix generate` then `git add kernelnix-plan.json` skips that)" value;

  # What `kernelnix plan` reads: the kernel directory without the flake's and
  # kernelnix's generated files and without build outputs, so none of them
  # makes the plan be computed again.
  generated = [
    "flake.nix"
    "flake.lock"
    "kernelnix-plan.json"
    "kernelnix-host.json"
    "build"
    ".venv"
  ];
  source = builtins.path {
    inherit path;
    name = "kernel-plan-source";
    filter =
      p: type:
      let
        rel = util.removePrefix (toString path + "/") (toString p);
      in
      !builtins.elem rel generated
      && !util.hasPrefix "result" rel
      && baseNameOf p != "__pycache__"
      && !util.hasSuffix ".pyc" rel;
  };
  matrixArgs =
    if buildSets == null then
      [ ]
    else
      [
        "--matrix"
        (builtins.toFile "kernelnix-build-sets.json" (builtins.toJSON { build-sets = buildSets; }))
      ];
  computed =
    system:
    step {
      inherit system;
      name = "kernel-plan";
      args = [
        "plan"
        source
        "--output"
        "${builtins.placeholder "out"}/kernelnix-plan.json"
        "--unique-id"
        uniqueId
      ] ++ matrixArgs;
    };
  # As a store path of its own, named like the committed file: a computed plan
  # with the bytes `kernelnix generate` would commit gives the same variant
  # derivations, so committing it later rebuilds nothing.
  computedFile =
    system:
    builtins.path {
      path = "${computed system}/kernelnix-plan.json";
      name = "kernelnix-plan.json";
    };
in
if !builtins.pathExists buildToml then
  throw "kernelnix: no build.toml next to flake.nix (${toString path})"
else if useCommitted then
  {
    systems = builtins.attrNames committed.systems;
    forSystem = system: committed;
    # The plan file a variant build reads, alone (editing nothing else rebuilds).
    fileFor =
      system:
      builtins.path {
        path = committedFile;
        name = "kernelnix-plan.json";
      };
  }
else
  {
    inherit systems;
    forSystem =
      system:
      computing (builtins.fromJSON (builtins.readFile "${computed system}/kernelnix-plan.json"));
    fileFor = computedFile;
  }
