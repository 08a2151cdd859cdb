# Small helpers the library needs, written against builtins only (no nixpkgs).
rec {
  # eachSystem [ "x86_64-linux" ] (system: { packages = { ... }; })
  #   == { packages.x86_64-linux = { ... }; }
  eachSystem =
    systems: f:
    builtins.foldl' (
      acc: system:
      acc // builtins.mapAttrs (output: value: (acc.${output} or { }) // { ${system} = value; }) (f system)
    ) { } systems;

  hasPrefix = prefix: s: builtins.substring 0 (builtins.stringLength prefix) s == prefix;

  hasSuffix =
    suffix: s:
    let
      n = builtins.stringLength s;
      k = builtins.stringLength suffix;
    in
    n >= k && builtins.substring (n - k) k s == suffix;

  removeSuffix =
    suffix: s:
    if hasSuffix suffix s then
      builtins.substring 0 (builtins.stringLength s - builtins.stringLength suffix) s
    else
      s;

  removePrefix =
    prefix: s:
    if hasPrefix prefix s then
      builtins.substring (builtins.stringLength prefix) (builtins.stringLength s) s
    else
      s;

  # Attribute set with the given names, each mapped through f.
  genAttrs =
    names: f:
    builtins.listToAttrs (
      map (name: {
        inherit name;
        value = f name;
      }) names
    );

  # "cutlass_3_8" -> "CUTLASS_3_8"
  toUpper = builtins.replaceStrings (characters "abcdefghijklmnopqrstuvwxyz") (
    characters "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
  );
  characters = s: builtins.genList (i: builtins.substring i 1 s) (builtins.stringLength s);

  # The attributes of `set` for which pred name value holds.
  filterAttrs =
    pred: set:
    builtins.removeAttrs set (builtins.filter (name: !pred name set.${name}) (builtins.attrNames set));

  # The first element of a list satisfying pred, or null.
  findFirst =
    pred: list:
    let
      found = builtins.filter pred list;
    in
    if found == [ ] then null else builtins.head found;

  # The directories above a relative path: "a/b/c.h" -> [ "a" "a/b" ].
  parentDirs =
    rel:
    let
      parts = builtins.filter builtins.isString (builtins.split "/" rel);
      count = builtins.length parts - 1;
      prefix = n: builtins.concatStringsSep "/" (builtins.genList (i: builtins.elemAt parts i) n);
    in
    builtins.genList (i: prefix (i + 1)) count;

  # A store path name made of `s`: each character a store name may not hold
  # becomes `-` (`csrc/flash fwd.cu` -> `csrc-flash-fwd.cu`).
  storeName =
    s:
    builtins.concatStringsSep "" (
      map (c: if builtins.match "[A-Za-z0-9+._?=-]" c == null then "-" else c) (characters s)
    );

  # Quote a string as one POSIX shell word: the only way a value from build.toml
  # (e.g. the Hub repo id) enters a generated script.
  shellQuote = s: "'" + builtins.replaceStrings [ "'" ] [ "'\\''" ] s + "'";

  # Variant names come from the matrix grammar; check them before they become
  # attribute names, store path names and words in scripts.
  checkVariantName =
    name:
    if builtins.match "[a-z0-9][a-z0-9._-]*" name != null then
      name
    else
      throw "kernelnix: invalid variant name '${name}' in kernelnix-plan.json; run `kernelnix generate`";

  # A runnable script (like nixpkgs' writeShellScriptBin): $out/bin/<name>.
  # `text` is the whole script; it reaches the builder as an environment
  # variable, never as Nix or shell code.
  # `tools`: the toolchain's shell and PATH that build it (buildTools).
  mkScript =
    {
      system,
      name,
      text,
      tools ? {
        shell = "/bin/sh";
        path = "/usr/bin:/bin";
      },
    }:
    builtins.derivation {
      inherit system name text;
      builder = tools.shell;
      args = [
        "-c"
        ''mkdir -p "$out/bin" && printf '%s' "$text" > "$out/bin/$name" && chmod +x "$out/bin/$name"''
      ];
      PATH = tools.path;
      preferLocalBuild = true;
      allowSubstitutes = false;
    }
    // {
      meta.mainProgram = name;
    };

  # A derivation for `nix develop`: the variables in `env` plus `shellHook`.
  # Building it is not meant to work; `nix develop` only reads its environment.
  # `bash`: the bash `nix develop` runs the shell's environment with: a store
  # path for a build in the sandbox (the hermetic toolchain's).
  mkShell =
    {
      system,
      name,
      env,
      shellHook ? "",
      bash ? "/bin/bash",
    }:
    builtins.derivation (
      env
      // {
        inherit system name shellHook;
        builder = bash;
        outputs = [ "out" ];
        args = [
          "-c"
          "echo 'kernelnix: ${name} is a shell for `nix develop`, not a package' >&2; exit 1"
        ];
      }
    );

  # The value at `path` (a list of attribute names) in `set`, or `default`.
  attrByPath =
    path: default: set:
    if path == [ ] then
      set
    else if builtins.isAttrs set && set ? ${builtins.head path} then
      attrByPath (builtins.tail path) default set.${builtins.head path}
    else
      default;

  # A version as variant names write it: major and minor digits joined
  # ("2.13" -> "213", "13" -> "130", "2025.3.2" -> "20253").
  flatVersion =
    version:
    let
      parts = builtins.filter builtins.isString (builtins.split "\\." version) ++ [ "0" ];
    in
    builtins.elemAt parts 0 + builtins.elemAt parts 1;

  # kernel-builder's "arch variant" of a plan variant: the Torch name of the
  # build set it is built from (what ciTests, devShells and testShells are keyed
  # by). It differs from the variant's name for noarch (`torch-cpu`) and
  # stable-ABI variants; tvm-ffi variants keep their name.
  archVariantName =
    name: variant:
    let
      compute =
        if variant.backend == "cuda" then
          "cu${flatVersion variant.backend-version}"
        else if builtins.elem variant.backend [ "rocm" "xpu" ] then
          "${variant.backend}${flatVersion variant.backend-version}"
        else
          variant.backend;
      abi = if hasSuffix "-darwin" variant.system then "" else "cxx11-";
    in
    if variant.kind == "tvm-ffi" then
      name
    else
      "torch${flatVersion variant.torch}-${abi}${compute}-${variant.system}";

  # ASCII lower case ("Jinja2" -> "jinja2").
  toLower =
    let
      letters = "abcdefghijklmnopqrstuvwxyz";
      lower = builtins.genList (i: builtins.substring i 1 letters) 26;
      upper = builtins.genList (i: builtins.substring i 1 "ABCDEFGHIJKLMNOPQRSTUVWXYZ") 26;
    in
    builtins.replaceStrings upper lower;

  last = list: builtins.elemAt list (builtins.length list - 1);
  init = list: builtins.genList (builtins.elemAt list) (builtins.length list - 1);

  # The list without repeated elements (first occurrence kept).
  unique = builtins.foldl' (acc: x: if builtins.elem x acc then acc else acc ++ [ x ]) [ ];
}
