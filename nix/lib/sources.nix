# The parts of the kernel directory that derivations read, as filtered store
# paths: editing a file outside them (README, CI config) rebuilds nothing.
{ util }:
{ path, plan }:
let
  root = toString path;
  relative = p: util.removePrefix (root + "/") (toString p);
  asSet = names: builtins.listToAttrs (map (name: { inherit name; value = true; }) names);

  # Exactly these files (and the directories that lead to them).
  onlyFiles =
    files:
    let
      fileSet = asSet files;
      dirSet = asSet (builtins.concatMap util.parentDirs files);
    in
    p: type: (if type == "directory" then dirSet else fileSet) ? ${relative p};

  # Everything below a top-level directory, except Python bytecode.
  underDir =
    dir: p: type:
    let
      rel = relative p;
    in
    (rel == dir || util.hasPrefix (dir + "/") rel)
    && baseNameOf p != "__pycache__"
    && !util.hasSuffix ".pyc" rel;

  filtered =
    name: filter:
    builtins.path {
      inherit path name filter;
    };
  optionalDir =
    dir: name: if builtins.pathExists (path + "/${dir}") then filtered name (underDir dir) else null;
  # What CMake compiles, as the plan lists it (kernelnix/plan/units.py); the rest
  # of the sources are headers and the Python package. The variant step checks
  # that every object the project compiles was built (kernelnix/compile/objects.py).
  isCompileUnit = source: builtins.elem source plan.compile-units;
  notUnits = builtins.filter (source: !(isCompileUnit source)) plan.sources;
in
{
  # What a variant build reads: the plan's `sources` (the plan comes apart).
  build = filtered "${plan.python-name}-source" (onlyFiles plan.sources);
  inherit isCompileUnit;
  # What one object's compile reads: its source and every file that is not a
  # compile unit (the headers it may include), so that editing another source
  # changes nothing of it.
  forObject =
    unit:
    filtered "${plan.python-name}-source-${util.storeName unit}" (onlyFiles (notUnits ++ [ unit ]));
  # What `kernelnix fill-card` reads: the card template, build.toml, the
  # package and benchmarks/; null without CARD.md.
  card =
    if builtins.pathExists (path + "/CARD.md") then
      filtered "${plan.python-name}-card-source" (
        p: type: onlyFiles (plan.sources ++ [ "CARD.md" ]) p type || underDir "benchmarks" p type
      )
    else
      null;
  # tests/ for ci-test, benchmarks/ for the bundle; null when absent.
  tests = optionalDir "tests" "${plan.python-name}-tests";
  benchmarks = optionalDir "benchmarks" "${plan.python-name}-benchmarks";
}
