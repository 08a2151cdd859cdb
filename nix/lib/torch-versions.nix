# kernel-builder's `torchVersions` argument on kernelnix's matrix. The function
# receives the matrix's build sets in kernel-builder's form
# ({ torchVersion = "2.13"; cudaVersion = "12.6"; systems = [ ... ];
# bundleBuild = true; }, or cpu/metal = true, rocmVersion, xpuVersion,
# tvmFfiVersion) and returns a new list in that form; the result goes back to
# matrix.json's form for `kernelnix plan --matrix`.
{ util, matrix }:
let
  versionKey = {
    cuda = "cudaVersion";
    rocm = "rocmVersion";
    xpu = "xpuVersion";
  };

  toKernelBuilder =
    bs:
    {
      torchVersion = bs.torch;
      inherit (bs) systems;
      bundleBuild = bs.bundle;
    }
    // (if versionKey ? ${bs.backend} then { ${versionKey.${bs.backend}} = bs.version; } else { ${bs.backend} = true; })
    // (if bs ? tvm-ffi then { tvmFfiVersion = bs.tvm-ffi; } else { });

  known = [
    "systems"
    "torchVersion"
    "bundleBuild"
    "cpu"
    "cudaVersion"
    "metal"
    "ptxasVersion"
    "rocmVersion"
    "tpu"
    "tvmFfiVersion"
    "xpuVersion"
  ];
  # The backend an entry names; kernel-builder's order when it names several.
  names =
    entry: backend:
    if versionKey ? ${backend} then entry ? ${versionKey.${backend}} else entry.${backend} or false;
  backendOf =
    entry:
    util.findFirst (names entry) [
      "cpu"
      "cuda"
      "metal"
      "rocm"
      "tpu"
      "xpu"
    ];

  fromKernelBuilder =
    entry:
    let
      context = builtins.toJSON entry;
      fail = message: throw "kernelnix: torchVersions: ${message}: ${context}";
      missing = builtins.filter (name: !(entry ? ${name})) [
        "systems"
        "torchVersion"
      ];
      unknown = builtins.filter (name: !builtins.elem name known) (builtins.attrNames entry);
      backend = backendOf entry;
    in
    if !builtins.isAttrs entry then
      throw "kernelnix: torchVersions must return a list of attribute sets"
    else if missing != [ ] then
      fail "an entry lacks ${builtins.concatStringsSep ", " missing}"
    else if unknown != [ ] then
      fail "an entry has unknown attribute(s) ${builtins.concatStringsSep ", " unknown}"
    else if backend == null then
      fail "an entry names no backend (cpu = true, cudaVersion, rocmVersion, xpuVersion, metal = true or tpu = true)"
    else
      {
        torch = entry.torchVersion;
        inherit backend;
        inherit (entry) systems;
        bundle = entry.bundleBuild or false;
      }
      // (if versionKey ? ${backend} then { version = entry.${versionKey.${backend}}; } else { })
      // (if entry ? tvmFfiVersion then { tvm-ffi = entry.tvmFfiVersion; } else { });
in
{
  # The build sets replacing the matrix's, or null when torchVersions keeps them
  # (then a committed kernelnix-plan.json stays valid).
  buildSets =
    torchVersions:
    let
      result = torchVersions (map toKernelBuilder matrix.build-sets);
      sets = map fromKernelBuilder result;
    in
    if torchVersions == null then
      null
    else if !builtins.isFunction torchVersions then
      throw "kernelnix: `torchVersions` must be a function taking one argument (the default version set)"
    else if !builtins.isList result then
      throw "kernelnix: torchVersions must return a list of versions"
    else if sets == matrix.build-sets then
      null
    else
      sets;
}
