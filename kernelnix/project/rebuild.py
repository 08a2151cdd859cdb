"""A kernel's variants built from source on this machine, for `kernelnix reproduce`.

`nix build` compiles nothing when a variant's output is already valid in the
store, or when a binary cache that Nix trusts serves it: a verification that
took such a copy would compare the cache's bytes with the published ones, and
say "identical" where both were altered the same way. So the kernel's own
derivations, its variants, are built here, always:

- their inputs first (the toolchain, the Torch and CUDA wheels, the filtered
  source, the plan), as Nix gets them anywhere: from a cache where one has them.
  Their downloads are fixed-output, checked by hash wherever they come from;
- a variant whose output is not in the store: built with substitution off;
- a variant whose output is already valid: built again by `nix-store --check`,
  which compares the rebuild with the store's copy. Where they differ, the
  rebuilt copy (Nix keeps it as `<output>.check`) is the one compared with the
  reference, and the report says the store's copy was not this source's build.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kernelnix.core.diagnostics import UserError
from kernelnix.project.nix import (
    FlakeProject,
    NixOptions,
    flake_archives,
    nix_command,
    prepare,
    require_offered,
    run,
    run_shown,
    sandbox_options,
)

# Nix's exit status when `--check` finds a rebuild unlike the store's copy.
CHECK_DIFFERS = 104
KEPT_BUILD_DIRECTORY = re.compile(r"keeping build directory '([^']+)'")


@dataclass(frozen=True)
class Rebuilt:
    """The rebuilt variants (name -> variant directory) and how each was built."""

    variants: dict[str, Path]
    # Built with no output in the store before, substitution off.
    fresh: tuple[str, ...]
    # Already in the store: built again and compared with that copy (`--check`).
    checked: tuple[str, ...]
    # Of those, the ones whose rebuild differed from the store's copy.
    unlike_store: tuple[str, ...]

    def summary(self) -> list[str]:
        """What was built, for the report: never a copy."""
        lines = [
            f"rebuilt from source on this machine: {len(self.variants)} variant "
            f"derivation{'s' if len(self.variants) != 1 else ''}, none substituted"
        ]
        if self.checked:
            lines.append(
                f"  {len(self.checked)} already in the Nix store, built again and compared "
                "with that copy (nix-store --check)"
            )
        lines += [
            f"  {name}: the store's copy differs from this rebuild: it was not built from "
            "this source (a binary cache or an earlier build put it there); the rebuild is "
            "the one compared"
            for name in self.unlike_store
        ]
        return lines


def _store_options(options: NixOptions) -> list[str]:
    """NixOptions for nix-store, which prints build logs unless told not to."""
    return ([] if options.print_build_logs else ["--no-build-output"]) + options.job_args()


def _nix_store(*args: str) -> list[str]:
    found = shutil.which("nix-store")
    if found is None:
        raise UserError.single("nix-store is not installed (it comes with nix)", fix="install Nix")
    return [found, *args]


def _bundle_names(project: FlakeProject) -> list[str]:
    command = nix_command("eval", "--json", project.ref("bundle.variantNames"), *project.nix_args)
    names: list[str] = json.loads(run(command, capture=True))
    return names


def _derivations(project: FlakeProject, names: Sequence[str]) -> dict[str, str]:
    """Each variant's derivation (`.drv` path): evaluating it builds nothing."""
    return {
        name: run(
            nix_command("eval", "--raw", project.ref(f"{name}.drvPath"), *project.nix_args),
            capture=True,
        ).strip()
        for name in names
    }


@dataclass(frozen=True)
class _Derivation:
    output: str
    inputs: tuple[str, ...]


def _read_derivations(drvs: Sequence[str]) -> dict[str, _Derivation]:
    """Each derivation's output path and the derivations it needs built first."""
    shown_json = json.loads(run(nix_command("show-derivation", *drvs), capture=True))
    return {
        drv: _Derivation(str(facts["outputs"]["out"]["path"]), tuple(facts["inputDrvs"]))
        for drv, facts in shown_json.items()
    }


def _valid(path: str) -> bool:
    done = subprocess.run(_nix_store("--check-validity", path), capture_output=True, check=False)
    return done.returncode == 0


def _check(drv: str, output: str, copy: Path, args: Sequence[str]) -> bool:
    """Build `drv` again and compare with its valid `output`: True when the same;
    else the rebuild is copied to `copy` (Nix's `.check` path is not a store path
    that stays) and False."""
    # Its stdout (the path) is not the report's.
    done = run_shown(_nix_store("--realise", "--check", "--keep-failed", drv, *args), capture=True)
    for kept in KEPT_BUILD_DIRECTORY.findall(done.tail):
        shutil.rmtree(kept, ignore_errors=True)
    if done.returncode == 0:
        return True
    rebuilt = Path(f"{output}.check")
    if done.returncode != CHECK_DIFFERS or not rebuilt.is_dir():
        sys.exit(done.returncode)
    shutil.copytree(rebuilt, copy, symlinks=True)
    shutil.rmtree(rebuilt, ignore_errors=True)
    return False


@contextmanager
def rebuilt_from_source(
    directory: Path, variant_names: Sequence[str], options: NixOptions, *, pinned: bool = False
) -> Iterator[Rebuilt]:
    """Build the bundle's variants, or `variant_names`, from source (never substituted,
    never taken from the store: see the module's text), in the sandbox when the
    flake's toolchain builds there; yields them, kept from garbage collection until
    the end of the `with` block. `pinned`: a checkout of a published commit, built
    as its flake and flake.lock say, nothing written into it (no generated file
    refreshed, no input overridden)."""
    if pinned:
        root = directory.resolve()
        project = FlakeProject(root, archives=(*options.archives, *flake_archives(root)))
    else:
        project = prepare(directory, options.archives)
    if variant_names:
        require_offered(project, *variant_names)
    names = list(variant_names) or _bundle_names(project)
    sandbox = list(sandbox_options(project, names[0] if variant_names else "bundle"))
    drvs = _derivations(project, names)
    facts = _read_derivations(list(drvs.values()))
    outputs = {name: facts[drv].output for name, drv in drvs.items()}
    inputs = sorted({i for drv in drvs.values() for i in facts[drv].inputs})
    store = [*sandbox, *project.substituters, *_store_options(options)]
    with tempfile.TemporaryDirectory(prefix="kernelnix-reproduce-") as work:
        roots = Path(work) / "roots"

        def realise(paths: Sequence[str], root: str, *extra: str) -> None:
            if paths:
                link = ("--add-root", str(roots / root), "--indirect")
                # Its stdout (the paths) is not the report's.
                run(_nix_store("--realise", *paths, *link, *extra, *store), capture=True)

        # Inputs as Nix gets them; the variants never from a cache.
        realise(inputs, "input")
        fresh = [name for name in names if not _valid(outputs[name])]
        realise([drvs[name] for name in fresh], "variant", "--option", "substitute", "false")
        checked = [name for name in names if name not in fresh]
        realise([outputs[name] for name in checked], "stored")
        variants: dict[str, Path] = {}
        unlike: list[str] = []
        for name in names:
            built = Path(outputs[name])
            if name in checked and not _check(drvs[name], outputs[name], Path(work) / name, store):
                unlike.append(name)
                built = Path(work) / name
            variants[name] = built / name
        yield Rebuilt(variants, tuple(fresh), tuple(checked), tuple(unlike))
