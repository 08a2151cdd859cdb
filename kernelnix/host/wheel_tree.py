"""Wheels unpacked once, and a variant's environment made of links to them.

A variant of the host toolchain builds against its own Torch: the wheels of
its build set (kernelnix/data/wheel-lock.json, `host`) are each unpacked once
(a Nix store path, or a directory of kernelnix's cache), and the variant's
environment is one directory that merges them the way `pip install --target`
would, made of links: a directory only one wheel has is one symbolic link, a
directory several wheels share (`nvidia/cu13/include`) is made and filled
entry by entry. Nothing is copied: programs under a `bin` directory are hard
links, because nvcc finds its toolkit (`../nvvm`, `../include`) relative to
its own path, not through symbolic links. The environment is the `PYTHONPATH`
entry of the build and of the import check, and holds nvcc for CUDA.

Both kernelnix (`kernelnix build --local`) and the host toolchain's Nix
derivations run this file, so it uses the standard library only; Nix runs it as
a script: `python3 wheel_tree.py unpack WHEEL DIR [WHEEL DIR ...]`,
`merge DIR UNPACKED...` or `bytecode DIR...` (the hermetic Python's own
standard library). Several wheels go to one process: a Python without
compiled standard library (Debian's, before its install step) spends most of a
short run compiling what it imports.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path, PurePosixPath

# Directories whose files are hard-linked, not symlinked (see the module doc).
HARD_LINKED_DIRS = ("bin",)
# A shared library name as wheels ship it (`libcudart.so.13`) and the name the
# linker looks for (`libcudart.so`): wheels cannot hold the link between them.
SONAME_SUFFIX = ".so."
# pip installs a wheel's `.pth` files into site-packages, where Python runs them
# at start-up (nvidia-cutlass-dsl's puts its `cutlass` package on sys.path); an
# environment is a PYTHONPATH entry, where Python does not look for them, so an
# environment that has any gets this hook, which Python imports at start-up.
# Python imports only the first `sitecustomize` on sys.path: each hook runs the
# `.pth` files of every environment that has one (a variant's Torch and its
# python-depends are two PYTHONPATH entries).
SITE_HOOK = "sitecustomize.py"
SITE_HOOK_MARK = "# Written by kernelnix (wheel_tree.py)"
SITE_HOOK_TEXT = f"""\
{SITE_HOOK_MARK}: run the .pth files of the environments on PYTHONPATH,
# as Python does for site-packages.
import os
import site
import sys

for _entry in list(sys.path):
    try:
        with open(os.path.join(_entry or ".", "{SITE_HOOK}")) as _hook:
            _ours = _hook.readline().startswith("{SITE_HOOK_MARK}")
    except OSError:
        continue
    if _ours:
        site.addsitedir(_entry)
"""
# Where NVIDIA's wheels put nvcc (`nvidia/cu13/bin/nvcc`; CUDA 12: `nvidia/cuda_nvcc/bin/nvcc`).
NVCC_GLOB = "nvidia/*/bin/nvcc"


class TreeError(Exception):
    """A wheel that cannot be unpacked or environments that cannot be merged."""


@contextmanager
def staged(dest: Path) -> Iterator[Path]:
    """A fresh directory beside `dest` that becomes `dest` when the block ends
    without an error, and is removed otherwise: no half-made tree is left."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    stage = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", dir=dest.parent))
    try:
        yield stage
        os.rename(stage, dest)
    except BaseException:
        shutil.rmtree(stage, ignore_errors=True)
        raise


def _member_path(name: str) -> PurePosixPath:
    path = PurePosixPath(name)
    if path.is_absolute() or ".." in path.parts:
        raise TreeError(f"the wheel has an entry outside its root: {name}")
    return path


def unpack(wheel: Path, dest: Path, bytecode: bool = True) -> Path:
    """Unpack `wheel` into the new directory `dest`, keeping executable bits, and
    with `bytecode` compile it (compile_bytecode; the script compiles the trees of
    one run together instead)."""
    if dest.exists():
        raise TreeError(f"{dest} exists already")
    try:
        archive = zipfile.ZipFile(wheel)
    except zipfile.BadZipFile as error:
        raise TreeError(f"{wheel} is not a wheel (a zip file): {error}") from error
    with archive, staged(dest) as stage:
        for member in archive.infolist():
            target = stage.joinpath(*_member_path(member.filename).parts)
            if member.is_dir():
                target.mkdir(parents=True, exist_ok=True)
                continue
            target.parent.mkdir(parents=True, exist_ok=True)
            with archive.open(member) as source, open(target, "wb") as out:
                shutil.copyfileobj(source, out, 1 << 20)
            mode = (member.external_attr >> 16) & 0o777
            os.chmod(target, 0o755 if mode & 0o111 else 0o644)
    if bytecode:
        compile_bytecode([dest])
    return dest


def compile_bytecode(trees: Sequence[Path]) -> None:
    """Bytecode beside every Python file of `trees`, as pip writes it on install:
    a tree in the Nix store is read-only, so without it every build step and
    import check compiles what it imports again (Torch's import takes twice as
    long). Unchecked hashes: the store's file times are not the ones compiled
    from. One process (one start for the dozens of wheels of a run), hash seed
    fixed, each tree at its final path (the file names are recorded): the same
    bytes on every build. A file that does not compile (Python 2, a newer
    Python's syntax) keeps none, as pip leaves it."""
    subprocess.run(
        [sys.executable, "-m", "compileall", "-qq", "--invalidation-mode", "unchecked-hash"]
        + [str(tree) for tree in trees],
        env={**os.environ, "PYTHONHASHSEED": "0"},
        check=False,
    )


def _link_file(source: Path, target: Path, hard: bool) -> None:
    if hard:
        try:
            os.link(source, target)
            return
        except OSError:
            pass  # another file system: a copy is the only way to keep the path
        shutil.copy2(source, target)
        return
    target.symlink_to(source)


def _merge_into(target: Path, sources: Sequence[Path], hard: bool) -> None:
    """Fill the directory `target` with the entries of the directories `sources`."""
    names: dict[str, list[Path]] = {}
    for source in sources:
        for entry in sorted(source.iterdir()):
            names.setdefault(entry.name, []).append(entry)
    for name, entries in sorted(names.items()):
        path = target / name
        directories = [e for e in entries if e.is_dir()]
        hard_here = hard or name in HARD_LINKED_DIRS
        if directories and (len(directories) > 1 or hard_here):
            # Shared by several wheels (or holding programs): made, then filled.
            path.mkdir()
            _merge_into(path, directories, hard_here)
        elif directories:
            path.symlink_to(directories[0])
        else:
            # The same file in several wheels (`nvidia/__init__.py`): the first.
            _link_file(entries[0], path, hard)


def _missing_linker_names(lib: Path) -> dict[str, str]:
    """`libX.so` -> `libX.so.N` for the libraries of `lib` that lack the plain name."""
    missing: dict[str, str] = {}
    for entry in sorted(lib.iterdir()):
        stem, dot, _ = entry.name.partition(SONAME_SUFFIX)
        plain = f"{stem}.so"
        if dot and entry.name.startswith("lib") and not os.path.lexists(lib / plain):
            missing.setdefault(plain, entry.name)
    return missing


def _add_linker_names(tree: Path) -> None:
    """`libX.so` beside each `libX.so.N` of the `lib` directories of the tree's
    merged directories (one wheel's linked `lib` is made a directory first)."""
    for lib in tree.rglob("lib"):
        if not lib.is_dir():
            continue
        missing = _missing_linker_names(lib)
        if not missing:
            continue
        if lib.is_symlink():
            source = lib.resolve()
            lib.unlink()
            lib.mkdir()
            _merge_into(lib, [source], hard=False)
        for plain, versioned in missing.items():
            (lib / plain).symlink_to(versioned)


def _add_lib64(tree: Path) -> None:
    """`lib64 -> lib` in a toolkit root: nvcc's profile links from `lib64`, the
    wheels ship `lib`."""
    for nvcc in tree.glob(NVCC_GLOB):
        root = nvcc.parent.parent
        if (root / "lib").is_dir() and not os.path.lexists(root / "lib64"):
            (root / "lib64").symlink_to("lib")


def _add_site_hook(tree: Path) -> None:
    """SITE_HOOK in an environment with `.pth` files (see SITE_HOOK)."""
    if any(tree.glob("*.pth")) and not os.path.lexists(tree / SITE_HOOK):
        (tree / SITE_HOOK).write_text(SITE_HOOK_TEXT)


def merge(dest: Path, unpacked: Sequence[Path]) -> Path:
    """The environment `dest`: the unpacked wheels merged, made of links."""
    if dest.exists():
        raise TreeError(f"{dest} exists already")
    missing = [str(path) for path in unpacked if not path.is_dir()]
    if missing:
        raise TreeError(f"not unpacked: {', '.join(missing)}")
    with staged(dest) as stage:
        _merge_into(stage, [path.resolve() for path in unpacked], hard=False)
        _add_linker_names(stage)
        _add_lib64(stage)
        _add_site_hook(stage)
    return dest


def find_nvcc(environment: Path) -> Path | None:
    """nvcc of an environment (`nvidia/cu13/bin/nvcc`, `nvidia/cuda_nvcc/bin/nvcc`)."""
    found = sorted(environment.glob(NVCC_GLOB))
    return found[0] if found else None


def main(argv: Sequence[str]) -> int:
    try:
        if len(argv) >= 3 and len(argv) % 2 == 1 and argv[0] == "unpack":
            pairs = zip(argv[1::2], argv[2::2], strict=True)
            compile_bytecode([unpack(Path(w), Path(d), bytecode=False) for w, d in pairs])
        elif len(argv) >= 2 and argv[0] == "bytecode":
            compile_bytecode([Path(a) for a in argv[1:]])
        elif len(argv) >= 2 and argv[0] == "merge":
            merge(Path(argv[1]), [Path(a) for a in argv[2:]])
        elif len(argv) == 2 and argv[0] == "nvcc":
            nvcc = find_nvcc(Path(argv[1]))
            print(nvcc or "")
        else:
            print(
                "usage: wheel_tree.py unpack WHEEL DIR [WHEEL DIR ...] | merge DIR UNPACKED... "
                "| bytecode DIR... | nvcc DIR",
                file=sys.stderr,
            )
            return 2
    except (TreeError, OSError) as error:
        print(f"kernelnix: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
