# The glibc target of the host toolchain's publishable Linux variants
# (kernelnix/host/glibc_target.py, docs/build.md): the ziglang wheel that the
# lock names for the system (kernelnix/data/wheel-lock.json, `host.glibc-target`),
# fetched by Nix's builtin fetchurl and unpacked like every locked wheel
# (./wheels.nix), then assembled by the host's compilers into one sysroot, a
# store path every variant of the machine shares. The build step of
# `kernelnix build --local` runs the same script into kernelnix's cache.
{ kernelnixSrc, wheels }:
let
  lockFile = builtins.fromJSON (builtins.readFile (kernelnixSrc + "/kernelnix/data/wheel-lock.json"));
  targets = (lockFile.host or { }).glibc-target or { };
  # The two scripts alone: changing the rest of kernelnix assembles nothing again.
  tools = builtins.path {
    path = kernelnixSrc + "/kernelnix/host";
    name = "kernelnix-glibc-target-tools";
    filter =
      path: type:
      builtins.elem (baseNameOf path) [
        "glibc_target.py"
        "wheel_tree.py"
      ];
  };
in
{
  # Why `system` has no target (null: it has one).
  missing =
    system:
    if targets ? ${system} then
      null
    else
      "the wheel lock has no glibc target for ${system} (only for ${
        builtins.concatStringsSep ", " (builtins.attrNames targets)
      }); run `kernelnix lock-wheels --only glibc-target --system ${system}`, or set hostGlibc = true in flake.nix for a build that only this machine loads";

  # The assembled sysroot of `system`.
  target =
    system: scriptEnv:
    let
      entry = targets.${system};
    in
    builtins.derivation (
      scriptEnv
      // {
        inherit system tools;
        name = "kernelnix-glibc-${entry.glibc}-${system}";
        zig = wheels.unpacked system entry.wheel;
        glibc = entry.glibc;
        arch = builtins.head (builtins.split "-" system);
        builder = "/bin/sh";
        args = [
          "-c"
          ''. "$hostEnv" && exec "$KERNELNIX_PYTHON" "$tools/glibc_target.py" assemble "$zig" "$out" "$glibc" "$arch"''
        ];
      }
    );
}
