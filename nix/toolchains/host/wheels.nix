# The host toolchain's locked wheels (kernelnix/data/wheel-lock.json, `host`,
# written by `kernelnix lock-wheels`): a variant builds against its own Torch
# and CUDA toolkit, never the build Python's.
#
# Each wheel is a fixed-output download (Nix's builtin fetchurl, URL and hash
# from the lock: no nixpkgs), unpacked once into a store path of its own; a
# build set's environment is a store path of links to those
# (kernelnix/host/wheel_tree.py, the code `kernelnix build --local` runs too).
# A wheel shared by several build sets lives in the store once.
{ kernelnixSrc }:
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

  # Unpacked with the host Python (env.sh finds it, as for every step).
  unpacked =
    system: scriptEnv: name:
    builtins.derivation (
      scriptEnv
      // {
        inherit system tool;
        name = "wheel-${stem name}";
        src = fetched name;
        builder = "/bin/sh";
        args = [
          "-c"
          ''. "$hostEnv" && exec "$KERNELNIX_PYTHON" "$tool" unpack "$src" "$out"''
        ];
      }
    );
in
rec {
  inherit unpacked;

  # `2.13-cuda-13`, `2.15-cuda-13.2`: the lock's name of a variant's build set
  # (kernelnix.host.environments.build_set_key).
  buildSetKey =
    variant:
    "${variant.torch}-${variant.backend}"
    + (if (variant.backend-version or null) != null then "-${variant.backend-version}" else "");

  # The lock's entry of a compiled variant for a Python tag (`cp311`), or null.
  entry =
    tag: variant:
    if variant.kind == "noarch" || variant.kind == "tvm-ffi" || tag == null then
      null
    else
      ((lock.environments or { }).${variant.system} or { }).${tag}.${buildSetKey variant} or null;

  # Why the lock has no entry for a variant (as kernelnix.host.environments.not_locked_reason).
  missing =
    tag: variant:
    let
      system = variant.system;
      tags = (lock.environments or { }).${system} or { };
      recorded = (((lock.missing or { }).${system} or { }).${tag} or { }).${buildSetKey variant} or null;
    in
    if variant.kind == "noarch" || variant.kind == "tvm-ffi" then
      "no wheels are locked for ${variant.kind} variants"
    else if tag == null then
      "kernelnix-host.json records no Python tag to choose locked wheels by; run `kernelnix generate`"
    else if recorded != null then
      recorded
    else if !(tags ? ${tag}) then
      "the wheel lock has no environments for ${tag} (this Python) on ${system}; run `kernelnix lock-wheels --python ${tag}`"
    else
      "the wheel lock has no ${buildSetKey variant} environment for ${tag} on ${system}";

  # The environment of an entry: one store path, the variant's PYTHONPATH.
  environment =
    system: scriptEnv: key: found:
    builtins.derivation (
      scriptEnv
      // {
        inherit system tool;
        name = "kernelnix-env-${key}";
        torch = found.torch;
        wheels = map (unpacked system scriptEnv) (found.wheels ++ (found.toolkit or [ ]));
        builder = "/bin/sh";
        args = [
          "-c"
          ''. "$hostEnv" && exec "$KERNELNIX_PYTHON" "$tool" merge "$out" $wheels''
        ];
      }
    );
}
