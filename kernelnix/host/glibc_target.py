"""A glibc 2.27 target without nixpkgs: the sysroot publishable Linux variants link against.

The kernel requirements ask for glibc 2.27, so that a variant loads on every
machine the Hub serves (Ubuntu 20.04, RHEL 8, Amazon Linux 2). This machine's
compiler would link against its own, newer glibc. The `ziglang` wheel on PyPI
carries what a 2.27 target needs: glibc's headers (the newest release's, with
zig's version gates on `__GLIBC_MINOR__`) and, made by `zig` on request, stub
libraries holding exactly the symbols and versions of glibc 2.27. Assembled
into a sysroot once per machine, the host compiler (gcc, nvcc's host side)
builds against it:

    usr/include/                the headers, patched (see _patch_headers)
    usr/include/c++ ...         links to the host compiler's libstdc++ headers
    usr/lib/<multiarch>/        the stub libraries, libc_nonshared.a, crti.o and
                                crtn.o, and compat.o (see COMPAT_SOURCE)
    kernelnix-glibc-target.json what the build step reads: the glibc version, the
                                multiarch name, and every glibc function newer
                                than the target with the release that added it

Both kernelnix (`build --local`, into its cache) and the host toolchain's Nix
derivation run this file, so it uses the standard library only (and
wheel_tree.py beside it); Nix runs it as a script:
`python3 glibc_target.py assemble UNPACKED_ZIGLANG_WHEEL DIR [GLIBC] [ARCH]`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

try:
    from kernelnix.host.wheel_tree import TreeError, staged
except ImportError:  # run as a script beside wheel_tree.py (Nix)
    from wheel_tree import TreeError, staged  # type: ignore[no-redef,import-not-found]

TARGET_FILE = "kernelnix-glibc-target.json"
DEFAULT_GLIBC = "2.27"
# zig's name of each architecture, its header folders (most specific first, as
# zig searches them), the ELF machine of its libraries, and Debian's multiarch name.
ARCHES = {
    "x86_64": ("x86", 62, "x86_64-linux-gnu", "ld-linux-x86-64.so.2"),
    "aarch64": ("aarch64", 183, "aarch64-linux-gnu", "ld-linux-aarch64.so.1"),
}
# The stub libraries zig makes, by the file name it gives them.
STUBS = ("libc.so.6", "libm.so.6", "libpthread.so.0", "libdl.so.2", "librt.so.1")
LOADER_STUB = "libld.so.2"
# libstdc++ looks for this header with __has_include and then uses
# `__libc_single_threaded` (glibc 2.32) inline: without it, it takes the old path.
REMOVED_HEADERS = ("sys/single_threaded.h",)
# The newest glibc's headers declare C23 functions (rsqrt, glibc 2.41) that clash
# with CUDA's math headers; zig does not gate this switch on the version.
C23_SWITCH = "#if __GLIBC_USE (IEC_60559_FUNCS_EXT) || __GLIBC_USE (ISOC23)\n"
C23_GATED = (
    "#if (__GLIBC_USE (IEC_60559_FUNCS_EXT) || __GLIBC_USE (ISOC23)) && __GLIBC_MINOR__ >= 41\n"
)
# The host's static libstdc++.a was compiled against its own glibc and refers to
# two of its symbols; hidden definitions answer them inside the kernel's library.
# `__libc_single_threaded` = 0 makes libstdc++ always use atomics, which is what
# it did before glibc 2.32; `arc4random` (glibc 2.36, std::random_device) reads
# getrandom(2), the system call glibc's own arc4random uses.
COMPAT_SOURCE = """\
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <errno.h>

__attribute__((visibility("hidden"))) char __libc_single_threaded = 0;

__attribute__((visibility("hidden"))) uint32_t arc4random(void) {
  uint32_t value;
  long got;
  do {
    got = syscall(SYS_getrandom, &value, sizeof value, 0);
  } while (got != (long)sizeof value && (got >= 0 || errno == EINTR));
  return value;
}
"""
_SYMVER = re.compile(r"^\.symver \w+, ([\w.]+)@@?GLIBC_[0-9.]+", re.MULTILINE)


class TargetError(Exception):
    """A ziglang wheel or a stub set that cannot make the target."""


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split("."))


def glibc_releases(zig_lib: Path) -> list[str]:
    """The glibc releases zig's ABI lists know, oldest first (named in their header)."""
    data = (zig_lib / "libc" / "glibc" / "abilists").read_bytes()
    offset = 1
    for _ in range(data[0]):  # library names, each NUL-terminated
        offset = data.index(0, offset) + 1
    count = data[offset]
    triples = sorted(data[offset + 1 + 3 * i : offset + 4 + 3 * i] for i in range(count))
    return [f"{a}.{b}" + (f".{c}" if c else "") for a, b, c in triples]


def _zig(root: Path) -> Path:
    zig = root / "ziglang" / "zig"
    if not (zig.is_file() and os.access(zig, os.X_OK)):
        raise TargetError(f"{root} is not an unpacked ziglang wheel: it has no ziglang/zig")
    return zig


def _make_stubs(zig: Path, arch: str, releases: Sequence[str], work: Path) -> dict[str, Path]:
    """zig's stub libraries of each glibc release (the folder holding libc.so.6): zig
    links a library against them and leaves them in its cache, a cache per release,
    as many at once as there are cores."""
    (work / "probe.c").write_text("void kernelnix_glibc_probe(void) {}\n")
    pending = list(releases)
    running: list[tuple[str, Path, subprocess.Popen[str]]] = []
    found: dict[str, Path] = {}
    while pending or running:
        while pending and len(running) < (os.cpu_count() or 1):
            release = pending.pop(0)
            cache = work / f"zig-{release}"
            command = [str(zig), "build-lib", "-dynamic", "-lc", "-fno-compiler-rt"]
            command += ["-fno-ubsan-rt", "-target", f"{arch}-linux-gnu.{release}", "probe.c"]
            env = {**os.environ, "ZIG_GLOBAL_CACHE_DIR": str(cache)}
            env["ZIG_LOCAL_CACHE_DIR"] = str(cache)
            try:
                process = subprocess.Popen(
                    command, cwd=work, env=env, text=True, stderr=subprocess.PIPE
                )
            except OSError as failure:
                raise TargetError(
                    f"cannot run {zig}: {failure.strerror}; the ziglang wheel is not one for "
                    "this machine"
                ) from failure
            running.append((release, cache, process))
        release, cache, process = running.pop(0)
        _, error = process.communicate()
        if process.returncode != 0:
            raise TargetError(f"zig could not make the glibc {release} stubs: {error.strip()}")
        libc = sorted(cache.rglob("libc.so.6"))
        if not libc:
            raise TargetError(f"zig made no libc.so.6 for glibc {release} under {cache}")
        found[release] = libc[0].parent
    return found


def _stub_symbols(folder: Path) -> set[str]:
    """The symbols of a stub set (read from zig's assembly beside the stubs)."""
    return {name for source in folder.glob("*.s") for name in _SYMVER.findall(source.read_text())}


def newer_symbols(stubs: dict[str, Path], target: str) -> dict[str, str]:
    """The glibc symbols the target lacks -> the release that added each (`stubs`:
    every release's stub folder): what a kernel's library may not leave unbound."""
    seen = _stub_symbols(stubs[target])
    added: dict[str, str] = {}
    for release in sorted(stubs, key=_version):
        if _version(release) <= _version(target):
            continue
        for name in sorted(_stub_symbols(stubs[release]) - seen):
            added[name] = release
            seen.add(name)
    return added


def check_machine(library: Path, arch: str) -> None:
    """A TargetError unless `library` is an ELF file for `arch`."""
    machine = ARCHES[arch][1]
    head = library.read_bytes()[:20]
    found = int.from_bytes(head[18:20], "little") if head[:4] == b"\x7fELF" else None
    if found != machine:
        raise TargetError(
            f"{library} is not a stub for {arch} (ELF machine {found}, expected {machine}): "
            "the ziglang wheel or its stubs are for another system"
        )


def _copy_headers(zig_lib: Path, zig_arch: str, include: Path) -> None:
    """zig's glibc headers for the architecture, the most specific folder winning."""
    base = zig_lib / "libc" / "include"
    folders = [f"{zig_arch}-linux-gnu", "generic-glibc", f"{zig_arch}-linux-any", "any-linux-any"]
    for folder in reversed(folders):
        if not (base / folder).is_dir():
            raise TargetError(f"the ziglang wheel has no headers in {base / folder}")
        _copy_contents(base / folder, include)


def _copy_contents(source: Path, dest: Path) -> None:
    """The files of `source` into `dest`, replacing those there: contents only, not
    modes, which are read-only in the Nix store (a sandboxed build, which may not
    override them, then could not replace a file or add one to a folder)."""
    for folder, _, files in os.walk(source):
        target = dest / Path(folder).relative_to(source)
        target.mkdir(parents=True, exist_ok=True)
        for name in files:
            shutil.copyfile(Path(folder) / name, target / name)


def _patch_headers(include: Path) -> None:
    for name in REMOVED_HEADERS:
        (include / name).unlink(missing_ok=True)
    start = include / "bits" / "libc-header-start.h"
    text = start.read_text()
    if text.count(C23_SWITCH) != 1:
        raise TargetError(f"{start} has no C23 switch to gate: an unsupported ziglang release")
    start.write_text(text.replace(C23_SWITCH, C23_GATED))


def _tool(name: str) -> str:
    """The host's `cc`, `c++` (or $CC, $CXX), `ar` or `strip`: the target is made for them."""
    found = shutil.which(os.environ.get({"cc": "CC", "c++": "CXX"}.get(name, ""), name))
    if found is None:
        raise TargetError(f"no {name} on PATH: the target is assembled for the host compiler")
    return found


def _link_cxx_headers(include: Path) -> None:
    """The host C++ compiler's libstdc++ headers, which g++ --sysroot looks for under
    the sysroot: links to the folders under /usr/include that it searches."""
    done = subprocess.run(
        [_tool("c++"), "-xc++", "-E", "-v", "-"],
        input="",
        capture_output=True,
        text=True,
        check=False,
    )
    for line in done.stderr.splitlines():
        folder = Path(line.strip())
        if "c++" not in folder.parts or not folder.is_relative_to("/usr/include"):
            continue
        top = Path(*folder.parts[: folder.parts.index("c++") + 1])  # /usr/include/c++
        link = include / top.relative_to("/usr/include")
        if top.is_dir() and not os.path.lexists(link):
            link.parent.mkdir(parents=True, exist_ok=True)
            link.symlink_to(top)


def _run(command: list[str], cwd: Path) -> str:
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise TargetError(f"{' '.join(command)} failed: {done.stderr.strip()}")
    return done.stdout


def _copy_archive(archive: Path, dest: Path) -> None:
    """The static library `archive` made anew at `dest`, without debug information.
    zig names its members by their paths in its cache (which `strip` cannot handle)
    and compiles them with debug information naming that cache and the wheel's
    path: a variant linking them would carry paths of this machine, or store paths."""
    members = _run([_tool("ar"), "t", str(archive)], archive.parent).split()
    base = next((p for p in archive.parents if members and (p / members[0]).is_file()), None)
    if base is None:
        raise TargetError(f"the members of {archive} are not beside it")
    _run([_tool("ar"), "rcs", str(dest), *members], base)
    _run([_tool("strip"), "--strip-debug", str(dest)], dest.parent)


def _fill_libraries(stubs: Path, lib: Path, arch: str, root: Path) -> None:
    loader = ARCHES[arch][3]
    lib.mkdir(parents=True)
    for name in STUBS:
        check_machine(stubs / name, arch)
        shutil.copyfile(stubs / name, lib / name)
        plain = name[: name.index(".so") + 3]
        if plain != "libc.so":
            (lib / plain).symlink_to(name)
    shutil.copyfile(stubs / LOADER_STUB, lib / loader)
    nonshared = sorted(stubs.parent.parent.rglob("libc_nonshared.a"))
    if not nonshared:
        raise TargetError(f"zig made no libc_nonshared.a beside {stubs}")
    _copy_archive(nonshared[0], lib / "libc_nonshared.a")
    (lib / "libc.so").write_text(
        "/* kernelnix: glibc's libc.so linker script, for the stubs beside it */\n"
        f"GROUP ( libc.so.6 libc_nonshared.a AS_NEEDED ( {loader} ) )\n"
    )
    for startfile in ("crti.o", "crtn.o"):
        # glibc's _init/_fini prologue and epilogue: no symbol of any glibc release.
        found = subprocess.run(
            [_tool("cc"), f"-print-file-name={startfile}"], capture_output=True, text=True
        ).stdout.strip()
        if not os.path.isabs(found):
            raise TargetError(f"the host C compiler has no {startfile}")
        shutil.copyfile(found, lib / startfile)
    (lib / "compat.c").write_text(COMPAT_SOURCE)
    done = subprocess.run(
        [_tool("cc"), *compile_flags(root), "-O2", "-fPIC", "-c", "compat.c", "-o", "compat.o"],
        cwd=lib,
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        raise TargetError(f"compat.o did not compile against the target: {done.stderr.strip()}")


def compile_flags(root: Path, glibc: str = DEFAULT_GLIBC) -> list[str]:
    """The C and C++ compiler's flags for the target `root`."""
    return [f"--sysroot={root}", f"-D__GLIBC_MINOR__={glibc.split('.')[1]}"]


def assemble(zig_root: Path, dest: Path, glibc: str = DEFAULT_GLIBC, arch: str = "x86_64") -> Path:
    """The sysroot of glibc `glibc` for `arch` at `dest`, from an unpacked ziglang wheel."""
    if arch not in ARCHES:
        raise TargetError(f"no glibc target for {arch}; kernelnix knows {', '.join(ARCHES)}")
    zig_arch, _, multiarch, _ = ARCHES[arch]
    zig = _zig(zig_root.resolve())
    dest = dest.absolute()
    releases = glibc_releases(zig.parent / "lib")
    if glibc not in releases:
        known = f"{releases[0]} to {releases[-1]}"
        raise TargetError(f"this ziglang wheel knows glibc {known}, not {glibc}")
    if dest.exists():
        raise TargetError(f"{dest} exists already")
    with tempfile.TemporaryDirectory(prefix="kernelnix-glibc-") as work, staged(dest) as stage:
        newer = [r for r in releases if _version(r) > _version(glibc)]
        stubs = _make_stubs(zig, arch, [glibc, *newer], Path(work))
        include = stage / "usr" / "include"
        _copy_headers(zig.parent / "lib", zig_arch, include)
        _patch_headers(include)
        _link_cxx_headers(include)
        # Compiled as the result will be: the headers above, the stubs below.
        _fill_libraries(stubs[glibc], stage / "usr" / "lib" / multiarch, arch, stage)
        description = {
            "glibc": glibc,
            "arch": arch,
            "multiarch": multiarch,
            "newest-glibc": releases[-1],
            "newer-symbols": newer_symbols(stubs, glibc),
        }
        (stage / TARGET_FILE).write_text(json.dumps(description, indent=1, sort_keys=True) + "\n")
    return dest


def main(argv: Sequence[str]) -> int:
    if len(argv) not in (3, 4, 5) or argv[0] != "assemble":
        print("usage: glibc_target.py assemble ZIGLANG_TREE DIR [GLIBC] [ARCH]", file=sys.stderr)
        return 2
    try:
        assemble(Path(argv[1]), Path(argv[2]), *argv[3:])
    except (TargetError, TreeError, OSError) as error:
        print(f"kernelnix: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
