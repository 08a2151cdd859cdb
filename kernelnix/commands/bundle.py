"""bundle: the step a kernel flake's bundle runs (nix/lib/bundle.nix): the variants
Nix built, side by side, each with its build provenance in its metadata.json
(kernelnix.publish.provenance), plus the kernel's benchmarks and card."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import click

from kernelnix.cli import command, reports_user_errors
from kernelnix.publish.provenance import BuildFacts, record_provenance


def _writable_copy(source: Path, target: Path) -> None:
    """A copy of a store path whose files and folders can be written (Nix makes
    the bundle's read-only again when it registers it)."""
    shutil.copytree(source, target, symlinks=True, copy_function=shutil.copyfile)
    for root, dirs, _ in os.walk(target):
        for name in [".", *dirs]:
            os.chmod(Path(root, name), 0o755)


@command("bundle")
@click.option("--out", required=True, type=click.Path(path_type=Path), help="The bundle.")
@click.option(
    "--facts",
    "facts_file",
    required=True,
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="What the flake knows of the build (JSON, nix/lib/kernel-flake.nix).",
)
@click.option(
    "--benchmarks",
    type=click.Path(exists=True, file_okay=False, path_type=Path),
    help="The kernel's benchmarks/ folder.",
)
@click.option(
    "--card",
    type=click.Path(exists=True, dir_okay=False, path_type=Path),
    help="The rendered CARD.md.",
)
@click.argument("outputs", nargs=-1, type=click.Path(exists=True, file_okay=False, path_type=Path))
@reports_user_errors
def bundle_command(
    out: Path,
    facts_file: Path,
    benchmarks: Path | None,
    card: Path | None,
    outputs: tuple[Path, ...],
) -> None:
    """Each of OUTPUTS is a variant derivation's output, the folder that holds
    the variant's directory.

    \b
    Examples:
      kernelnix bundle --out bundle --facts facts.json /nix/store/...-relu-torch213-...
    """
    facts = BuildFacts.from_json(facts_file.read_text())
    out.mkdir(parents=True, exist_ok=True)
    for output in outputs:
        for variant in sorted(output.iterdir()):
            _writable_copy(variant, out / variant.name)
            record_provenance(out / variant.name, facts)
    if benchmarks is not None:
        _writable_copy(benchmarks, out / "benchmarks")
    if card is not None:
        shutil.copyfile(card, out / "CARD.md")
