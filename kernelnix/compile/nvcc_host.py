"""nvcc's host compiler, wrapped so that CUDA device code holds no path of the build.

nvcc preprocesses each `.cu` file with its host compiler (`gcc -E`) and hands the
output to cicc, which takes the file names of its line markers (`# 12 "/path/x.h"`)
into the line tables of `-lineinfo` and `-G`. gcc does not apply `-ffile-prefix-map`
to line markers, so the fatbin kept the absolute paths of Torch's, CUDA's and the
kernel's headers. The wrapper runs the real compiler and rewrites the line markers
of a device pass's preprocessed output with the same maps (`-ffile-prefix-map`,
`-fdebug-prefix-map`) that the CMake project passes through `-Xcompiler`.

It also maps the work directory (the folder above the build folder, where Ninja
runs nvcc) for every run, `__FILE__` included: that map is not on nvcc's command
line, which ccache hashes as written, so a copy of the kernel elsewhere still hits
the cache. For the same reason the wrappers are not in the work directory but in
one named after their text in kernelnix's cache (`-ccbin` is hashed as written).

nvcc also writes the source's path as given into each fatbin entry (fatbinary's
`--ident`), and CMake gives it absolute: the launcher (first of the CUDA compiler
launchers) hands nvcc the source relative to the build folder, and the wrapper makes
a relative line marker absolute again before mapping it (cicc would join it to the
working directory).

Both are this module's text behind the build's Python (stdlib only, no import of
kernelnix: they run once per nvcc step).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

WRAPPER_DIR = "nvcc-host"
WORK_NEUTRAL = "/kernelnix/work"
DEVICE_PASS_SUFFIX = ".cpp1.ii"
HOST_COMPILER = "-DCMAKE_CUDA_HOST_COMPILER="
MAP_OPTIONS = ("-ffile-prefix-map=", "-fdebug-prefix-map=")
# A line marker of gcc's output (`# 12 "file" 3`) or a #line directive.
LINE_MARKER = re.compile(rb'^(#(?: |line )\d+ ")((?:[^"\\]|\\.)*)(")', re.MULTILINE)


def prefix_maps(args: list[str]) -> list[tuple[str, str]]:
    """(old, new) of each path map in the arguments, in order (gcc: the last match wins)."""
    maps = []
    for arg in args:
        for option in MAP_OPTIONS:
            if arg.startswith(option) and "=" in arg[len(option) :]:
                old, new = arg[len(option) :].split("=", 1)
                maps.append((old, new))
    return maps


def _escaped(text: str) -> bytes:
    """A file name as gcc writes it in a line marker."""
    return os.fsencode(text).replace(b"\\", b"\\\\").replace(b'"', b'\\"')


def remap_line_markers(text: bytes, maps: list[tuple[str, str]]) -> bytes:
    """The preprocessed text with each line marker's file name made absolute and
    mapped as gcc maps `__FILE__`: by the last map whose old prefix starts it."""
    encoded = [(_escaped(old), _escaped(new)) for old, new in reversed(maps) if old]
    cwd = os.getcwdb()

    def mapped(match: re.Match[bytes]) -> bytes:
        name = match.group(2)
        if not name.startswith((b"/", b"<")):  # not <built-in> nor <command-line>
            name = os.path.normpath(os.path.join(cwd, name))
        for old, new in encoded:
            if name.startswith(old):
                name = new + name[len(old) :]
                break
        return match.group(1) + name + match.group(3)

    return LINE_MARKER.sub(mapped, text)


def _output_file(args: list[str]) -> str | None:
    for index, arg in enumerate(args):
        if arg == "-o" and index + 1 < len(args):
            return args[index + 1]
        if arg.startswith("-o") and len(arg) > 2:
            return arg[2:]
    return None


def _device_pass_output(args: list[str]) -> str | None:
    """The file a device pass's preprocessing writes for cicc (nvcc names it
    `<tmp>_<source>[.compute_NN].cpp1.ii`), or None. ccache's own `nvcc -E` (which
    runs a device pass into ccache's file) and the host pass keep their real file
    names: ccache's direct mode finds the included files by them, and gcc maps host
    debug information itself."""
    if "-E" not in args:
        return None
    output = _output_file(args)
    return output if output and output.endswith(DEVICE_PASS_SUFFIX) else None


def run(real: str, args: list[str]) -> int:
    """Run the real compiler with the work directory mapped first (a later, more
    specific map wins); a device pass's line markers mapped too."""
    work = os.path.dirname(os.getcwd())
    args = [f"-ffile-prefix-map={work}={WORK_NEUTRAL}", *args]
    output = _device_pass_output(args)
    if output is None:
        os.execv(real, [real, *args])
    status = subprocess.run([real, *args], check=False).returncode
    if status == 0:
        path = Path(output)
        path.write_bytes(remap_line_markers(path.read_bytes(), prefix_maps(args)))
    return status


def launch(command: list[str]) -> None:
    """Run the compile command (the next launcher or nvcc) with the source after `-c`
    relative to the working directory (the build folder)."""
    command = list(command)
    for index, arg in enumerate(command[:-1]):
        if arg == "-c" and os.path.isabs(command[index + 1]):
            command[index + 1] = os.path.relpath(command[index + 1])
    os.execvp(command[0], command)


def real_host_compiler() -> str | None:
    """The compiler nvcc would run: `CUDAHOSTCXX` (CMake's variable, the hermetic
    toolchain's g++), else gcc on the PATH (nvcc's default); None: neither."""
    chosen = os.environ.get("CUDAHOSTCXX") or "gcc"
    return shutil.which(chosen)


def host_compiler_definitions(work: Path, launcher: str | None) -> list[str]:
    """The CMake definitions that make the wrapper nvcc's host compiler and the
    launcher the first CUDA compiler launcher (none when no host compiler is found:
    nvcc's own error then says so)."""
    real = real_host_compiler()
    if real is None:
        return [f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launcher}"] if launcher else []
    compilers = _siblings(Path(real))
    # ccache checks nvcc's host compiler by size and time: the wrapper has its compiler's.
    scripts: dict[str, tuple[str, int | None]] = {
        c.name: (f"run({str(c)!r}, sys.argv[1:])", c.stat().st_mtime_ns) for c in compilers
    }
    scripts["launch"] = ("launch(sys.argv[1:])", None)
    directory = _scripts_dir(work, scripts)
    launchers = ";".join([str(directory / "launch"), *([launcher] if launcher else [])])
    return [
        f"{HOST_COMPILER}{directory / Path(real).name}",
        f"-DCMAKE_CUDA_COMPILER_LAUNCHER={launchers}",
    ]


def configure_environment(definitions: list[str]) -> dict[str, str] | None:
    """CMake's environment for the configure of `definitions`: CUDAHOSTCXX, which
    newer CMake takes before CMAKE_CUDA_HOST_COMPILER (the hermetic toolchain sets
    it to its g++), names the wrapper too; None: no wrapper, os.environ as it is."""
    for definition in definitions:
        if definition.startswith(HOST_COMPILER):
            return {**os.environ, "CUDAHOSTCXX": definition.removeprefix(HOST_COMPILER)}
    return None


def _scripts_dir(work: Path, scripts: dict[str, tuple[str, int | None]]) -> Path:
    """The scripts (name: the call each ends with, its time), each this module's text run by the
    build's Python, in a folder of kernelnix's cache named after them (the same path
    for every copy of a kernel), else (no writable home or cache: a Nix build, whose
    work directory is always the same) in the work directory."""
    # Imported here: the scripts run this module's text without kernelnix.
    from kernelnix.host.environments import cache_dir

    source = Path(__file__).read_text(encoding="utf-8")
    texts = {
        name: f"#!{sys.executable} -I\n{source}\n\nsys.exit({call})\n"
        for name, (call, _) in scripts.items()
    }
    digest = hashlib.sha256(repr(sorted(texts.items())).encode()).hexdigest()[:16]
    # A Nix build's HOME (/homeless-shelter) must not come to exist: Nix refuses
    # to build unsandboxed then.
    home = Path.home()
    shared = "KERNELNIX_CACHE" in os.environ or (home.is_dir() and os.access(home, os.W_OK))
    places = [cache_dir() / WRAPPER_DIR / digest] if shared else []
    for directory in (*places, work / WRAPPER_DIR):
        try:
            directory.mkdir(parents=True, exist_ok=True)
            for name, text in texts.items():
                _write_executable(directory / name, text, scripts[name][1])
        except OSError:
            continue
        return directory
    raise OSError(f"cannot write nvcc's host compiler wrapper into {work / WRAPPER_DIR}")


def _write_executable(path: Path, text: str, mtime_ns: int | None) -> None:
    """Written beside and renamed into place: builds running at once share the folder."""
    partial = path.with_name(f".{path.name}.{os.getpid()}")
    partial.write_text(text, encoding="utf-8")
    partial.chmod(0o755)
    if mtime_ns is not None:
        os.utime(partial, ns=(mtime_ns, mtime_ns))
    os.replace(partial, path)


def _siblings(real: Path) -> list[Path]:
    """The compiler and its C or C++ twin beside it (gcc, g++-12, clang++): nvcc is
    given one and runs both, named as given (it tells gcc from clang by the name)."""
    c_name = real.name.replace("g++", "gcc").replace("clang++", "clang")
    cxx_name = c_name.replace("gcc", "g++").replace("clang", "clang++")
    return [
        real,
        *(p for p in {real.with_name(c_name), real.with_name(cxx_name)} - {real} if p.exists()),
    ]
