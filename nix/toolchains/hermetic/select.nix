# What each build set of the matrix takes: pure data from matrix.json (its
# `hermetic` part) and the wheel lock (kernelnix/data/wheel-lock.json), no
# nixpkgs. kernelnix.host.hermetic_wheels (Python) reads the same data;
# tests/e2e/test_hermetic.py checks that both name the same wheels.
{
  util,
  matrix,
  lock,
}:
rec {
  data = matrix.hermetic;
  lockFile = "kernelnix/data/wheel-lock.json";
  lockCommand = "run `kernelnix lock-wheels` in the kernelnix checkout on a machine with network access, then commit ${lockFile}";

  # "12.6" -> { major = "12"; minor = "6"; patch = "0"; }
  versionParts =
    version:
    let
      parts = builtins.splitVersion version;
      at = i: if builtins.length parts > i then builtins.elemAt parts i else "0";
    in
    {
      major = at 0;
      minor = at 1;
      patch = at 2;
    };

  # fill "cudaPackages_{major}_{minor}" "12.6" == "cudaPackages_12_6"
  fill =
    template: version:
    let
      p = versionParts version;
    in
    builtins.replaceStrings [ "{major}" "{minor}" "{patch}" ] [ p.major p.minor p.patch ] template;

  # The first `n` components: truncate 2 "7.2.1" == "7.2"
  truncate =
    n: version:
    let
      parts = builtins.splitVersion version;
    in
    builtins.concatStringsSep "." (
      builtins.genList (builtins.elemAt parts) (
        if builtins.length parts < n then builtins.length parts else n
      )
    );

  # The name of a build set's entry in the overlay: torch213-cu126,
  # torch212-cpu, torch213-rocm72, torch212-xpu20253 (major and minor, like
  # variant names).
  key =
    bs:
    let
      flat = v: fill "{major}{minor}" v;
      token =
        {
          cuda = "cu${flat bs.version}";
          rocm = "rocm${flat bs.version}";
          xpu = "xpu${flat bs.version}";
        }
        .${bs.backend} or bs.backend;
    in
    "torch${flat bs.torch}-${token}";

  # The build sets of one system the hermetic toolchain knows.
  buildSets =
    system:
    if builtins.elem system data.systems then
      builtins.filter (bs: builtins.elem system bs.systems) matrix.build-sets
    else
      [ ];

  # Why variants of a build set are not offered, or null when they are: CPU
  # always is; a toolkit when matrix.json says nixpkgs has it (`offered`, else
  # its `not-offered` reason); and only with a locked Torch wheel.
  notOffered =
    system: bs:
    let
      toolkit = data.toolkits.${bs.backend} or { };
    in
    if bs.backend != "cpu" && !(toolkit.offered or false) then
      toolkit.not-offered or "the hermetic toolchain has no ${bs.backend} toolkit (matrix.json: hermetic.toolkits)"
    else if flavor bs == null then
      "Torch publishes no Linux wheel for ${bs.backend}"
    else
      wheelProblem system bs;

  # A version without trailing zero components, as the plan writes them
  # ("13.0" -> "13", "2026.0.0" -> "2026").
  normalize =
    version:
    let
      parts = builtins.filter builtins.isString (builtins.split "\\." version);
      trim = ps: if builtins.length ps > 1 && util.last ps == "0" then trim (util.init ps) else ps;
    in
    builtins.concatStringsSep "." (trim parts);
  sameVersion =
    a: b: if a == null || b == null then a == b else normalize a == normalize b;

  # The build set a plan variant comes from (the plan records its Torch,
  # backend and backend version), or null.
  buildSetOf =
    system: variant:
    util.findFirst (
      bs:
      sameVersion bs.torch variant.torch
      && bs.backend == variant.backend
      && sameVersion (bs.version or null) (variant.backend-version or null)
    ) (buildSets system);

  release =
    bs:
    data.torch-releases.${bs.torch}
      or (throw "kernelnix: matrix.json: hermetic.torch-releases has no release for Torch ${bs.torch}");

  # The wheel flavor: cpu, cu126, rocm7.1, xpu; null for a backend without
  # Linux wheels (metal).
  flavor =
    bs:
    if data.torch-wheels.flavor ? ${bs.backend} then
      fill data.torch-wheels.flavor.${bs.backend} (bs.version or "0")
    else
      null;

  # Every Torch wheel the hermetic toolchain may fetch: what the lock file
  # must hold (kernelnix.host.hermetic_wheels.needed_wheels computes the same list).
  wheelKeys = util.unique (
    builtins.concatMap (
      system:
      map (bs: {
        inherit system;
        release = release bs;
        flavor = flavor bs;
        python = data.python.wheel-tag;
      }) (builtins.filter (bs: flavor bs != null) (buildSets system))
    ) data.systems
  );

  # Why the Torch wheel of a build set cannot be fetched, or null when it is
  # locked: the toolchain does not offer a variant it could not evaluate.
  wheelProblem =
    system: bs:
    let
      rel = release bs;
      fl = flavor bs;
      entry = ((lock.torch.${rel} or { }).${system} or { }).${fl} or null;
      what = "the Torch ${rel} wheel for ${fl} on ${system} (${key bs})";
    in
    if entry == null || (entry.hash or null) == null then
      "${lockFile} has no hash for ${what}; ${lockCommand}"
    else if entry.python != data.python.wheel-tag then
      "${lockFile} locks ${what} for ${entry.python}, the toolchain's Python is ${data.python.wheel-tag}; ${lockCommand}"
    else
      null;

  # The locked Torch wheel of a build set: { url; hash; ... }.
  torchWheel =
    system: bs:
    let
      problem = wheelProblem system bs;
      rel = release bs;
    in
    if problem != null then
      throw "kernelnix (hermetic toolchain): ${problem}"
    else
      lock.torch.${rel}.${system}.${flavor bs} // { version = rel; };

  # A locked pure-Python or abi3 wheel (the `kernels` loader): { url; hash; dependencies; }.
  pythonWheel =
    system: name:
    let
      version = data.python-wheels.${name};
      entry = (((lock.python or { }).${name} or { }).${version} or { }).${system} or null;
    in
    if entry == null || (entry.hash or null) == null then
      throw "kernelnix (hermetic toolchain): ${lockFile} has no hash for the ${name} ${version} wheel on ${system}; ${lockCommand}"
    else
      entry // { inherit version; };
}
