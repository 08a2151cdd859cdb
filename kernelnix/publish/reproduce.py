"""`kernelnix reproduce`: a rebuilt bundle compared with a published one, variant by variant.

The rebuild is `nix build` of the kernel's flake (kernelnix.project.nix, in the
sandbox when the flake's toolchain is the hermetic one), or a bundle built
before (`--built`); the reference is a bundle directory or a kernel repository
on the Hub at a revision (kernelnix.publish.hub: only the variants compared are
downloaded).

A variant is identical when every file the `kernels` loader hashes (those of
`kernelnix hash`: all but metadata.json, its signature and bytecode) has the
same bytes on both sides, and metadata.json is the same JSON once the
reference's `digest` is left out (a published variant carries the digest
`kernelnix hash` wrote; a fresh build has none), and the build record of
either side (`provenance.slsa`: which Nix, derivation and repository built it,
kernelnix.publish.provenance), which says how a variant was built, not what
it is. Where files differ, the report says where: for ELF files the sections
whose bytes differ, compared by name (kernelnix.checks.elf reads the section
table), else the first differing offset.

A digest recorded in the reference's metadata.json is checked the way the
loader's `verify_variant` checks it: the rebuilt files are hashed with its
algorithm and compared path by path (kernelnix.publish.digest), so "matches the
digest" means the loader would accept the rebuilt files under the published
metadata.json. The reference's own files are checked against it too: a stale
digest is a difference of the published variant.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
from collections import Counter
from collections.abc import Collection, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import click

from kernelnix.checks import discover_variants
from kernelnix.checks.elf import ElfError, Section, is_elf, read_sections
from kernelnix.checks.files import METADATA, hashed_files
from kernelnix.core.diagnostics import UserError, display_path
from kernelnix.core.process import shown
from kernelnix.plan.metadata import Digest, read_metadata
from kernelnix.project.nix import NixOptions
from kernelnix.project.rebuild import rebuilt_from_source
from kernelnix.publish.digest import compute_digest, digest_violations
from kernelnix.publish.hub import HubVariants, download_variants, list_variants

_CHUNK = 1 << 20
DIGEST_KEY = "digest"
BUILD_RECORD_KEY = "slsa"  # under `provenance`

State = Literal["identical", "differs", "only rebuilt", "only in the reference"]


@dataclass(frozen=True)
class VariantVerdict:
    """One variant: its state, what differs (one line per file or key) and notes."""

    name: str
    state: State
    differences: tuple[str, ...] = ()
    notes: tuple[str, ...] = ()


def compare_bundles(
    rebuilt: Mapping[str, Path], reference: Mapping[str, Path | None]
) -> list[VariantVerdict]:
    """Every variant of either side, by name; a reference variant whose path is
    None was listed but not fetched (it has no rebuilt twin)."""
    verdicts = []
    for name in sorted(rebuilt.keys() | reference.keys()):
        ours, theirs = rebuilt.get(name), reference.get(name)
        if ours is None:
            verdicts.append(VariantVerdict(name, "only in the reference"))
        elif theirs is None:
            verdicts.append(VariantVerdict(name, "only rebuilt"))
        else:
            verdicts.append(compare_variant(name, ours, theirs))
    return verdicts


def compare_variant(name: str, rebuilt: Path, reference: Path) -> VariantVerdict:
    differences = file_differences(rebuilt, reference) + metadata_differences(rebuilt, reference)
    digest_problems, notes = digest_check(rebuilt, reference)
    differences += digest_problems
    state: State = "differs" if differences else "identical"
    return VariantVerdict(name, state, tuple(differences), tuple(notes))


def file_differences(rebuilt: Path, reference: Path) -> list[str]:
    """A line per hashed file that is not the same on both sides."""
    ours, theirs = set(hashed_files(rebuilt)), set(hashed_files(reference))
    lines = [f"{path}: only rebuilt" for path in ours - theirs]
    lines += [f"{path}: only in the reference" for path in theirs - ours]
    for path in sorted(ours & theirs):
        where = file_difference(rebuilt / path, reference / path)
        if where is not None:
            lines.append(f"{path}: {where}")
    return sorted(lines)


def file_difference(rebuilt: Path, reference: Path) -> str | None:
    """Where two files differ (None: same bytes): ELF sections, else the first offset."""
    with rebuilt.open("rb") as ours, reference.open("rb") as theirs:
        a, b = ours.fileno(), theirs.fileno()
        sizes = os.fstat(a).st_size, os.fstat(b).st_size
        first = first_difference(a, b, (0, sizes[0]), (0, sizes[1]))
        if first is None:
            return None
        if is_elf(os.pread(a, 4, 0)) and is_elf(os.pread(b, 4, 0)):
            try:
                return elf_difference(rebuilt, reference, a, b, first)
            except ElfError:
                pass  # a malformed ELF file is compared as bytes
        return bytes_difference(first, sizes)


def bytes_difference(first: int, sizes: tuple[int, int]) -> str:
    if first == min(sizes):
        return f"one file ends at offset {first} (sizes {sizes[0]} and {sizes[1]} bytes)"
    size = f"{sizes[0]} bytes" if sizes[0] == sizes[1] else f"sizes {sizes[0]} and {sizes[1]}"
    return f"first difference at offset {first} (0x{first:x}; {size})"


def first_difference(
    ours: int, theirs: int, our_range: tuple[int, int], their_range: tuple[int, int]
) -> int | None:
    """The first offset, from each range's start, where the bytes of two open
    files differ ((offset, size) ranges); None when they are the same."""
    (our_start, our_size), (their_start, their_size) = our_range, their_range
    done = 0
    while done < min(our_size, their_size):
        length = min(_CHUNK, our_size - done, their_size - done)
        a = os.pread(ours, length, our_start + done)
        b = os.pread(theirs, length, their_start + done)
        if a != b:
            return done + next(i for i, (x, y) in enumerate(zip(a, b, strict=False)) if x != y)
        done += length
    return None if our_size == their_size else done


def _by_name(sections: list[Section]) -> dict[str, Section]:
    """Sections keyed by name; a repeated name gets `#2`, `#3`, ... in header order."""
    seen: Counter[str] = Counter()
    keyed = {}
    for section in sections:
        seen[section.name] += 1
        count = seen[section.name]
        keyed[section.name if count == 1 else f"{section.name}#{count}"] = section
    return keyed


def elf_difference(rebuilt: Path, reference: Path, ours: int, theirs: int, first: int) -> str:
    """The sections of two ELF files whose bytes differ, compared by name."""
    mine, other = _by_name(read_sections(rebuilt)), _by_name(read_sections(reference))
    parts = []
    for name in mine.keys() & other.keys():
        a, b = mine[name], other[name]
        at = first_difference(ours, theirs, (a.offset, a.size), (b.offset, b.size))
        if at is not None or a.type != b.type:
            parts.append((a.offset, _section_change(name or "(unnamed)", a, b, at)))
    parts += [(s.offset, f"{n} only rebuilt") for n, s in mine.items() if n not in other]
    parts += [(s.offset, f"{n} only in the reference") for n, s in other.items() if n not in mine]
    if not parts:
        return (
            "ELF file: every section is the same; the headers or padding between sections "
            f"differ, first at offset {first} (0x{first:x})"
        )
    return "ELF sections differ: " + ", ".join(text for _, text in sorted(parts))


def _section_change(name: str, ours: Section, theirs: Section, at: int | None) -> str:
    if ours.size != theirs.size:
        return f"{name} (sizes {ours.size} and {theirs.size})"
    if at is None:
        return f"{name} (types {ours.type} and {theirs.type})"
    return f"{name} (at byte {at} of the section)"


def _metadata(variant: Path) -> dict[str, Any] | None:
    try:
        data = json.loads((variant / METADATA).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    return data if isinstance(data, dict) else None


def _without_build_record(metadata: dict[str, Any]) -> dict[str, Any]:
    """metadata.json without `provenance.slsa`, the record of the build (which Nix,
    derivation, repository) that a bundle adds to its variants: not the variant's."""
    provenance = metadata.get("provenance")
    if not isinstance(provenance, dict) or BUILD_RECORD_KEY not in provenance:
        return metadata
    kept = {key: value for key, value in provenance.items() if key != BUILD_RECORD_KEY}
    return {**metadata, "provenance": kept}


def metadata_differences(rebuilt: Path, reference: Path) -> list[str]:
    """metadata.json compared as JSON, without the reference's digest and either
    side's build record: the keys that differ."""
    ours, theirs = _metadata(rebuilt), _metadata(reference)
    if ours is None or theirs is None:
        if ours == theirs:
            return []
        side = "rebuilt" if ours is None else "reference"
        return [f"{METADATA}: missing or not a JSON object in the {side} variant"]
    ours, theirs = _without_build_record(ours), _without_build_record(theirs)
    keys = (ours.keys() | theirs.keys()) - {DIGEST_KEY}
    changed = sorted(key for key in keys if ours.get(key) != theirs.get(key))
    if not changed:
        return []
    return [f"{METADATA}: differs in " + ", ".join(f"`{key}`" for key in changed)]


def _recorded_digest(variant: Path) -> Digest | None:
    metadata = read_metadata(variant).model
    return metadata.digest if metadata is not None else None


def digest_check(rebuilt: Path, reference: Path) -> tuple[list[str], list[str]]:
    """(differences, notes) of the reference's recorded digest, checked the
    loader's way against the rebuilt files and against the reference's own."""
    recorded = _recorded_digest(reference)
    if recorded is None:
        return [], ["the reference records no digest (`kernelnix hash`)"]
    problems = [
        f"digest: {problem} (rebuilt files against the reference's digest)"
        for problem in digest_violations(recorded, compute_digest(rebuilt, recorded.algorithm))
    ]
    problems += [
        f"digest: {problem} (the reference's own files: its digest is stale)"
        for problem in digest_violations(recorded, compute_digest(reference, recorded.algorithm))
    ]
    if problems:
        return problems, []
    note = (
        f"the rebuilt files match the reference's {recorded.algorithm} digest "
        f"({len(recorded.files)} files), as the `kernels` loader verifies it"
    )
    return [], [note]


def summary(verdicts: list[VariantVerdict]) -> str:
    identical = sum(verdict.state == "identical" for verdict in verdicts)
    return f"{identical} of {len(verdicts)} variants identical"


def report_lines(verdicts: list[VariantVerdict], rebuild: Sequence[str] = ()) -> Iterator[str]:
    """The report: a line per variant, then its differences and notes, indented;
    how the rebuilt side was made; the count of identical variants."""
    for verdict in verdicts:
        yield f"{verdict.name}: {verdict.state}"
        yield from (f"  {line}" for line in verdict.differences)
        yield from (f"  note: {note}" for note in verdict.notes)
    yield from rebuild
    yield summary(verdicts)


# ------------------------------------------------------------- the command


HUB_REPO = re.compile(r"[\w.-]+/[\w.-]+")


def variants_of(path: Path) -> dict[str, Path]:
    """The variants of a bundle, a build tree or a variant directory, by name."""
    return {variant.name: variant for variant in discover_variants(path)}


@dataclass(frozen=True)
class Reference:
    """What the rebuild is compared with, resolved before anything is built: a
    directory's variants, or a Hub repository's at a revision (listed, and
    downloaded once the variants compared are known)."""

    names: tuple[str, ...]
    local: Mapping[str, Path] | None = None
    hub: HubVariants | None = None

    def variants(self, wanted: Collection[str]) -> dict[str, Path | None]:
        """Every variant of the reference; those in `wanted` with their directory."""
        if self.local is not None:
            return dict(self.local)
        assert self.hub is not None
        root = download_variants(self.hub, wanted)
        return {
            name: root / name if root is not None and (root / name).is_dir() else None
            for name in self.names
        }


def resolve_reference(against: str, revision: str | None, version: int | None) -> Reference:
    """The reference, checked: a bundle directory, or a kernel repository on the Hub
    that exists at the revision (a missing one, or a Hub that does not answer, is
    one UserError before anything is built)."""
    if Path(against).is_dir():
        if revision is not None:
            raise UserError.single(
                "--revision applies to a Hub repository, not to a directory",
                key="--revision",
                fix="drop --revision, or pass --against <owner>/<name>",
            )
        local = variants_of(Path(against))
        return Reference(tuple(sorted(local)), local=local)
    if not HUB_REPO.fullmatch(against):
        raise UserError.single(
            "no such directory",
            file=display_path(Path(against)),
            fix="pass a bundle directory, or a Hub repository as <owner>/<name>",
        )
    listed = list_variants(against, revision, version)
    return Reference(listed.names, hub=listed)


def _source_version(source: Path) -> int | None:
    """The kernel's version (its v<version> branch on the Hub), from build.toml."""
    from kernelnix.config import load_config

    return load_config(source).config.general.version


def _selected(variants: Mapping[str, Any], names: Collection[str]) -> dict[str, Any]:
    return {name: path for name, path in variants.items() if not names or name in names}


def _require_known(names: Collection[str], *sides: Collection[str]) -> None:
    known = set().union(*sides)
    unknown = sorted(set(names) - known)
    if unknown:
        raise UserError.single(
            f"no variant {', '.join(unknown)} in the rebuild nor in the reference",
            key="--variant",
            fix="pick one of: " + (", ".join(sorted(known)) or "(none)"),
        )


@dataclass(frozen=True)
class Reproduction:
    """The verdict per variant, and how the rebuilt side was made."""

    verdicts: list[VariantVerdict]
    rebuild: tuple[str, ...]


@contextmanager
def _rebuilt(
    source: Path, built: Path | None, names: Sequence[str], nix: NixOptions
) -> Iterator[tuple[dict[str, Path], tuple[str, ...]]]:
    """The rebuilt variants and what says how they were made: those of `built`,
    else those built from `source` on this machine (kernelnix.project.rebuild)."""
    if built is not None:
        yield variants_of(built), (f"compared the variants of {built} (--built): nothing rebuilt",)
        return
    with rebuilt_from_source(source, names, nix) as rebuilt:
        yield rebuilt.variants, tuple(rebuilt.summary())


def reproduce(
    source: Path,
    against: str,
    *,
    revision: str | None = None,
    variant_names: Sequence[str] = (),
    built: Path | None = None,
    nix: NixOptions | None = None,
) -> Reproduction:
    """Rebuild `source` from source (or take `built`) and compare it with `against`,
    a bundle directory or a Hub repository at `revision`; only `variant_names`
    when given. The reference is resolved first: nothing is built for one that
    does not exist."""
    if not source.is_dir():
        raise UserError.single(
            "no such directory",
            file=display_path(source),
            fix="pass the kernel's directory (the one with build.toml and flake.nix)",
        )
    if built is not None and not built.is_dir():
        raise UserError.single(
            "no such directory",
            file=display_path(built),
            key="--built",
            fix="pass a bundle built before, or leave --built out to build it",
        )
    reference = resolve_reference(against, revision, _source_version(source))
    if built is not None:
        _require_known(variant_names, variants_of(built), reference.names)
    with _rebuilt(source, built, variant_names, nix or NixOptions()) as (everything, how):
        rebuilt = _selected(everything, variant_names)
        _require_known(variant_names, everything, reference.names)
        found = reference.variants(rebuilt.keys())
        verdicts = compare_bundles(rebuilt, _selected(found, variant_names))
        return Reproduction(verdicts, how)


# ------------------------------------------------ a published kernel, no source at hand


@dataclass(frozen=True)
class PublishedSource:
    """Where a published kernel's source lives, as its build provenance records it."""

    uri: str
    commit: str


def published_source(repo_id: str, variants: Mapping[str, Path]) -> PublishedSource:
    """The one source repository and commit the variants' provenance names; a
    UserError for a variant that names none, or was built from a dirty tree."""
    found: dict[tuple[str, str], list[str]] = {}
    for name, variant in sorted(variants.items()):
        model = read_metadata(variant).model
        slsa = model.provenance.slsa if model is not None and model.provenance else None
        where = f"{repo_id}'s variant {name}"
        if slsa is None:
            raise UserError.single(
                f"{where} records no build provenance (provenance.slsa): it was not built "
                "through a kernel flake's bundle, so where its source lives is not known",
                key="SOURCE",
                fix=f"pass the kernel's source: kernelnix reproduce SOURCE --against {repo_id}",
            )
        source = slsa.predicate.build_definition.external_parameters.source
        commit = source.digest.get("gitCommit")
        if source.dirty or commit is None:
            raise UserError.single(
                f"{where} was built from a work tree with uncommitted changes: that source "
                "was never committed, so it cannot be fetched and built again",
                key="SOURCE",
                fix="publish a build of a clean commit (commit, build the bundle, upload)",
            )
        if source.uri is None:
            raise UserError.single(
                f"{where} names its source commit {commit} but no repository",
                key="SOURCE",
                fix=f"pass a checkout of it: kernelnix reproduce SOURCE --against {repo_id} "
                "(`kernelnix hash` in a git checkout with a remote records the repository)",
            )
        found.setdefault((source.uri, commit), []).append(name)
    if len(found) != 1:
        sources = "; ".join(f"{u} at {c} ({', '.join(n)})" for (u, c), n in found.items())
        raise UserError.single(
            f"{repo_id}'s variants were built from different sources: {sources}",
            key="--variant",
            fix="reproduce the variants of one source at a time with --variant",
        )
    ((uri, commit),) = found
    return PublishedSource(uri, commit)


def checkout(source: PublishedSource, directory: Path) -> Path:
    """The source at its commit in `directory`, fetched with git."""
    for command in (
        ["git", "clone", "--quiet", "--no-checkout", source.uri, str(directory)],
        ["git", "-C", str(directory), "checkout", "--quiet", "--detach", source.commit],
    ):
        click.echo(shown(command), err=True)
        done = subprocess.run(command, capture_output=True, text=True, check=False)
        if done.returncode != 0:
            said = (done.stderr.strip().splitlines() or ["no message"])[-1]
            raise UserError.single(
                f"cannot fetch the kernel's source {source.uri} at {source.commit}: "
                f"`{' '.join(command[:3])} ...` said: {said}",
                key="SOURCE",
                fix="check that the repository is reachable from here and still has that "
                "commit, or pass a checkout: kernelnix reproduce SOURCE --against OWNER/NAME",
            )
    return directory


def reproduce_published(
    repo_id: str,
    *,
    revision: str | None = None,
    variant_names: Sequence[str] = (),
    nix: NixOptions | None = None,
) -> Reproduction:
    """Rebuild a kernel published on the Hub from the source its provenance names,
    with the kernelnix its flake.lock pins, and compare. Everything is checked
    before anything is built: the repository, the revision, the variants, their
    provenance."""
    listed = list_variants(repo_id, revision, None)
    _require_known(variant_names, listed.names)
    wanted = list(variant_names) or list(listed.names)
    if not wanted:
        raise UserError.single(
            f"{repo_id} has no variants at {listed.revision}",
            key="--revision",
            fix="pass the revision of a published bundle (its v<N> branch)",
        )
    root = download_variants(listed, wanted)
    assert root is not None
    published = {name: root / name for name in wanted}
    source = published_source(repo_id, published)
    with tempfile.TemporaryDirectory(prefix="kernelnix-source-") as work:
        kernel = checkout(source, Path(work) / "source")
        if not (kernel / "flake.lock").is_file():
            raise UserError.single(
                f"the source {source.uri} at {source.commit} has no flake.lock: which "
                "kernelnix built it is not pinned, so it cannot be built the same way",
                key="SOURCE",
                fix="commit flake.lock with the kernel before building what you publish",
            )
        with rebuilt_from_source(kernel, wanted, nix or NixOptions(), pinned=True) as rebuilt:
            verdicts = compare_bundles(rebuilt.variants, published)
            how = (f"source: {source.uri} at {source.commit}", *rebuilt.summary())
            return Reproduction(verdicts, how)
