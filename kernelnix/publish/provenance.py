"""Build provenance of the variants of a bundle built through a kernel's flake.

Each variant's metadata.json gets `provenance.slsa`: an in-toto statement of
SLSA build provenance v1 (kernelnix.plan.metadata.SlsaStatement). What Nix
knows when it evaluates the flake (the variant's derivation, Nix's version,
the kernelnix the kernel's flake.lock pins, the toolchain lock's digest, the
locked wheels and release archives the variant was built with, the source commit) reaches the
bundle's step as JSON (`BuildFacts`); the step adds what only the built files
say, their sha256, and writes the statement. A variant's own derivation never
records any of it: its bytes stay the same whatever Nix, machine or repository
URL built it, which is what `kernelnix reproduce` compares (it leaves
`provenance.slsa` out). `kernelnix hash` adds the source repository's URL,
read from git in the kernel's checkout, where the flake had none
(`record_source_repository`, which `kernelnix hash` runs).
"""

from __future__ import annotations

import base64
import copy
import json
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelnix.checks.files import hashed_files
from kernelnix.checks.metadata_rules import file_sha256
from kernelnix.core.fileio import write_atomic
from kernelnix.plan.metadata import (
    BuildDefinition,
    Builder,
    BuildMetadata,
    ExternalParameters,
    Metadata,
    ResourceDescriptor,
    RunDetails,
    SlsaPredicate,
    SlsaStatement,
    SourceParameter,
    read_metadata,
)


@dataclass(frozen=True)
class VariantFacts:
    derivation: str
    wheels: tuple[ResourceDescriptor, ...]
    # Header dependencies fetched from their GitHub release (no wheel locked).
    archives: tuple[ResourceDescriptor, ...]


@dataclass(frozen=True)
class BuildFacts:
    """What the flake knows of a bundle's build (nix/lib/bundle.nix writes it)."""

    nix: str
    kernelnix: ResourceDescriptor
    kernelnix_version: str
    toolchain: str
    toolchain_lock: ResourceDescriptor | None
    source: SourceParameter
    variants: dict[str, VariantFacts]

    @classmethod
    def from_json(cls, text: str) -> BuildFacts:
        data = json.loads(text)
        lock = data.get("toolchain-lock")
        return cls(
            nix=data["nix"],
            kernelnix=ResourceDescriptor.validate(data["kernelnix"]),
            kernelnix_version=data["kernelnix-version"],
            toolchain=data["toolchain"],
            toolchain_lock=None if lock is None else ResourceDescriptor.validate(lock),
            source=SourceParameter.validate(data["source"]),
            variants={
                name: VariantFacts(
                    facts["derivation"],
                    tuple(_locked(wheel, "sha256") for wheel in facts["wheels"]),
                    tuple(_locked(archive, NAR_DIGEST) for archive in facts["archives"]),
                )
                for name, facts in data["variants"].items()
            },
        )


# A release archive's hash is of its unpacked tree (the NAR Nix hashes), not of
# the file at its URL: a digest name of its own says so.
NAR_DIGEST = "nixNarSha256"


def _locked(entry: dict[str, str], digest_name: str) -> ResourceDescriptor:
    """A locked download (`hash`: SRI sha256, as the locks write it) as a dependency,
    its digest under `digest_name`."""
    _, _, value = entry["hash"].partition("-")
    digest = {digest_name: base64.b64decode(value).hex()}
    return ResourceDescriptor(name=entry["name"], uri=entry["url"], digest=digest)


def subjects(variant_dir: Path) -> list[ResourceDescriptor]:
    """The variant's files the loader hashes, each with its sha256: what was built."""
    return [
        ResourceDescriptor(name=rel, digest={"sha256": file_sha256(variant_dir / rel)})
        for rel in hashed_files(variant_dir)
    ]


def statement(variant_dir: Path, name: str, facts: BuildFacts) -> SlsaStatement:
    variant = facts.variants[name]
    dependencies = [facts.kernelnix]
    if facts.toolchain_lock is not None:
        dependencies.append(facts.toolchain_lock)
    dependencies += variant.wheels + variant.archives
    return SlsaStatement(
        subject=subjects(variant_dir),
        predicate=SlsaPredicate(
            build_definition=BuildDefinition(
                external_parameters=ExternalParameters(
                    source=facts.source, variant=name, toolchain=facts.toolchain
                ),
                resolved_dependencies=dependencies,
            ),
            run_details=RunDetails(
                builder=Builder(
                    version={"nix": facts.nix, "kernelnix": facts.kernelnix_version},
                ),
                metadata=BuildMetadata(invocation_id=variant.derivation),
            ),
        ),
    )


def _rewrite_provenance(variant_dir: Path, change: Callable[[dict[str, Any]], None]) -> None:
    """metadata.json with `change` made to its `provenance` (JSON), kept in its key
    order with the keys kernelnix does not know, valid, written whole."""
    read = read_metadata(variant_dir).valid(fix="rebuild the variant")
    raw = copy.deepcopy(read.raw)
    change(raw.setdefault("provenance", {}))
    Metadata.validate(raw)
    write_atomic(read.path, json.dumps(raw, indent=2) + "\n")


def record_provenance(variant_dir: Path, facts: BuildFacts) -> None:
    """Write the variant's SLSA statement into its metadata.json."""
    made = statement(variant_dir, variant_dir.name, facts).to_data()
    _rewrite_provenance(variant_dir, lambda provenance: provenance.update(slsa=made))


def source_repository(directory: Path) -> str | None:
    """The URL of the git repository `directory` is in: its `origin` remote, else
    its first remote; None outside git or without a remote."""

    def git(*args: str) -> str:
        done = subprocess.run(
            ["git", "-C", str(directory), *args], capture_output=True, text=True, check=False
        )
        return done.stdout.strip() if done.returncode == 0 else ""

    remotes = git("remote").split()
    if not remotes:
        return None
    return git("remote", "get-url", "origin" if "origin" in remotes else remotes[0]) or None


def record_source_repository(variant_dir: Path) -> bool:
    """Record the repository of the git checkout the variant lies in (a bundle copied
    into the kernel's build/) as the source's, where its statement names none;
    whether it changed metadata.json."""
    metadata = read_metadata(variant_dir).model
    slsa = metadata.provenance.slsa if metadata and metadata.provenance else None
    if slsa is None or slsa.predicate.build_definition.external_parameters.source.uri:
        return False
    uri = source_repository(variant_dir)
    if uri is None:
        return False

    def change(provenance: dict[str, Any]) -> None:
        definition = provenance["slsa"]["predicate"]["buildDefinition"]
        definition["externalParameters"]["source"]["uri"] = uri

    _rewrite_provenance(variant_dir, change)
    return True
