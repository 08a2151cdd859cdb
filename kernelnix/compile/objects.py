"""A variant's CMake build tree handed from one derivation to the next, so that each
object compiles in a derivation of its own (docs/distributed.md, "One derivation per
object"): configured once from the sources' names, each object compiled in a copy of
that tree, then the objects linked in another copy.

Every step restores the tree at the same absolute path as the one-derivation build
(the sandbox's /build), so that each compile is the command Ninja runs there, and
the objects and the library are the same bytes.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from kernelnix.core.diagnostics import UserError
from kernelnix.plan.model import Plan

PROJECT = "project"
BUILD = "build"
# The configured tree's record: the folder it was configured in (`work`), the
# one above (`root`: a Nix build's $TMPDIR, which holds its home too), and
# what CMake compiles (`objects`: each source, relative to the kernel's tree, and
# its object file, relative to the build tree).
OBJECTS_FILE = "objects.json"


def write_skeleton(plan: Plan, where: Path) -> Path:
    """The kernel's tree with every file empty: CMake's configure reads the names of
    the sources, not their text, so an edit does not configure again."""
    for source in plan.sources:
        (where / source).parent.mkdir(parents=True, exist_ok=True)
        (where / source).touch()
    return where


def compile_edges(build: Path, kernel: Path) -> dict[str, str]:
    """Each source the build tree compiles, relative to `kernel`, and its object."""
    listed = subprocess.run(
        ["ninja", "-t", "compdb"],
        cwd=build,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    prefix = f"{kernel}/"
    return {
        entry["file"].removeprefix(prefix): entry["output"]
        for entry in json.loads(listed)
        if entry["file"].startswith(prefix)
    }


def save_configured(work: Path, kernel: Path, out: Path) -> None:
    """The configured project and build tree of `work`, and what they compile, into `out`
    (the kernel's tree stays behind: each later step links its own)."""
    edges = compile_edges(work / BUILD, kernel)
    project = work / PROJECT
    shutil.copytree(
        project,
        out / PROJECT,
        symlinks=True,
        ignore=lambda folder, names: [kernel.name] if Path(folder) == project else [],
    )
    shutil.copytree(work / BUILD, out / BUILD, symlinks=True)
    record = {"work": str(work), "root": str(work.parent), "objects": edges}
    (out / OBJECTS_FILE).write_text(json.dumps(record, indent=1, sort_keys=True) + "\n")


def _record(configured: Path) -> dict[str, Any]:
    record: dict[str, Any] = json.loads((configured / OBJECTS_FILE).read_text())
    return record


def configured_objects(configured: Path) -> dict[str, str]:
    objects: dict[str, str] = _record(configured)["objects"]
    return objects


def object_of(configured: Path, source: str) -> str:
    """The object file of `source`; a UserError when the project does not compile it."""
    objects = configured_objects(configured)
    if source not in objects:
        raise UserError.single(
            f"the variant's CMake project compiles no {source!r}",
            fix=f"name one of the sources it compiles: {', '.join(sorted(objects))}",
        )
    return objects[source]


def restore_configured(configured: Path, work: Path) -> tuple[Path, Path]:
    """A writable copy of the configured tree in `work`: (project, build).

    build.ninja is made the newest file of the tree, so that Ninja never runs CMake
    again (the copies' times are not the configure step's).
    """
    for part in (PROJECT, BUILD):
        if (work / part).exists():
            shutil.rmtree(work / part)
        shutil.copytree(configured / part, work / part, symlinks=True)
    record = _record(configured)
    # The work folder first, then what else is under the one above it.
    moves = [(record["work"], str(work)), (record["root"], str(work.parent))]
    moves = [(old, new) for old, new in moves if old != new]
    for part in (PROJECT, BUILD):
        (work / part).chmod(0o755)
        for folder, dirs, files in os.walk(work / part):
            for name in (*dirs, *files):
                path = Path(folder, name)
                if not path.is_symlink():
                    path.chmod(path.stat().st_mode | 0o200)
                if name in files and moves:
                    _relocate(path, moves)
    (work / BUILD / "build.ninja").touch()
    return work / PROJECT, work / BUILD


def _relocate(path: Path, moves: list[tuple[str, str]]) -> None:
    """The configure step's folder named as this step's in a text file of the tree:
    without Nix's sandbox each derivation builds in a folder of its own name
    (/tmp/nix-build-<name>-0, its home inside), and CMake's files hold absolute
    paths (the nvcc wrappers' in the home among them)."""
    data = path.read_bytes()
    # Text only: the configure's probe binaries are not run again.
    if b"\0" in data:
        return
    moved = data
    for old, new in moves:
        moved = moved.replace(old.encode(), new.encode())
    if moved != data:
        path.write_bytes(moved)


def place_objects(configured: Path, build: Path, objects: list[Path]) -> None:
    """Every object the project compiles, from the object steps' outputs, into `build`;
    a UserError naming any that none of them holds."""
    for given in objects:
        for found in given.rglob("*"):
            if found.is_file():
                target = build / found.relative_to(given)
                target.parent.mkdir(parents=True, exist_ok=True)
                # Contents only: the store's modes would make the folders read-only.
                shutil.copyfile(found, target)
    expected = configured_objects(configured)
    missing = sorted(s for s, o in expected.items() if not (build / o).is_file())
    if missing:
        raise UserError.single(
            f"no object was built for {', '.join(missing)}",
            fix="build the variant with an object step for every source its project compiles",
        )


def link_command(build: Path, library: str) -> str:
    """The command Ninja runs to link `library` from its objects (nothing else)."""
    return subprocess.run(
        ["ninja", "-t", "commands", "-s", library],
        cwd=build,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
