# The C library of the hermetic toolchain and the compilers around it.
#
# glibc 2.27 comes from an old nixpkgs (the flake input nixpkgs-glibc-2_27,
# pinned in flake.lock: the last revisions that ship 2.27), built with that
# nixpkgs' own toolchain; current gcc cannot compile it. A library linked
# against it only asks for symbol versions up to GLIBC_2.27, so it loads on
# every manylinux_2_27/2_28 host and newer.
#
# stdenvFor gcc: a stdenv whose compiler is `gcc` (unwrapped, modern) on that
# C library. libgcc and libstdc++ are part of the compiler: they are compiled
# once more against glibc 2.27, or the static libstdc++ the kernels link
# (kept private, docs/libstdcxx.md; the default policy forbids a dynamic one) would
# bring symbol versions of the newer glibc with it.
{
  pkgs,
  glibcNixpkgs,
  system,
  version,
}:
let
  old = import glibcNixpkgs {
    inherit system;
    config = { };
    overlays = [ ];
  };
  oldGlibc = old.glibc;

  # Fit the old derivation into current nixpkgs: its wrappers expect a
  # `pname`, a `getent` output and `libgcc` in passthru.
  glibc =
    if oldGlibc.version != version then
      throw "kernelnix (hermetic toolchain): the nixpkgs-glibc-2_27 input has glibc ${oldGlibc.version}, matrix.json asks for ${version} (hermetic.glibc); pin an older nixpkgs revision in flake.lock"
    else
      oldGlibc.overrideAttrs (previous: {
        pname = "glibc";
        outputs =
          previous.outputs ++ (if builtins.elem "getent" previous.outputs then [ ] else [ "getent" ]);
        postInstall = (previous.postInstall or "") + ''
          install -Dm755 "$bin/bin/getent" -t "$getent/bin"
          # This glibc ships libgcc_s.so as a bare symlink (for bootstrapping);
          # g++ then links no static libgcc. Make it GCC's linker script.
          if [ -e "$out/lib/libgcc_s.so" ]; then
            rm "$out/lib/libgcc_s.so"
            echo 'GROUP ( libgcc_s.so.1 -lgcc )' > "$out/lib/libgcc_s.so"
          fi
        '';
        passthru = (previous.passthru or { }) // {
          libgcc = pkgs.stdenv.cc.cc.libgcc or null;
        };
      });

  bintools = pkgs.wrapBintoolsWith {
    bintools = pkgs.bintools-unwrapped;
    libc = glibc;
  };
  wrap =
    gcc:
    pkgs.wrapCCWith {
      cc = gcc;
      inherit bintools;
    };

  # Another compiler (ROCm's clang) on glibc 2.27, with the C++ library of
  # `gccForLibs` (a gcc of stdenvFor, so libstdc++ is on glibc 2.27 too).
  wrapWith =
    {
      cc,
      gccForLibs,
    }:
    pkgs.wrapCCWith {
      inherit cc bintools gccForLibs;
    };

  stdenvFor =
    gcc:
    let
      # Stage 1: the modern compiler, as built, on glibc 2.27 ...
      stage1 = pkgs.overrideCC pkgs.stdenv (wrap gcc);
      # ... compiles the compiler again, so its runtime libraries are on it
      # too; libstdc++.a as position-independent code, since the kernels
      # link it into a shared module.
      rebuilt = (gcc.override { stdenv = stage1; }).overrideAttrs (previous: {
        configureFlags = (previous.configureFlags or [ ]) ++ [ "--with-pic" ];
      });
    in
    pkgs.overrideCC pkgs.stdenv (wrap rebuilt);
in
{
  inherit glibc stdenvFor wrapWith;
}
