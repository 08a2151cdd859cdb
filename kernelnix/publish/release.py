"""What an upload sends, worked out from the local files before the Hub is asked:
the repository, the branch, the checked variants (kernelnix.publish.gate), the
card and the benchmarks (`prepare_release`), then the commits that bring a
branch's files to them (`plan_commits`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from kernelnix.checks import CheckOptions
from kernelnix.checks.files import shipped_files
from kernelnix.config import LoadedConfig, load_config
from kernelnix.config.load import BUILD_TOML
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path
from kernelnix.emit.card import render_card
from kernelnix.publish.gate import CheckedVariant, checked_variants

MAIN = "main"
BATCH_SIZE = 1000
REPO_TYPES = ("kernel", "model")
COMMIT_MESSAGE = "Uploaded using `kernelnix`."
BUILD_PREFIX = "build/"
BENCHMARKS = "benchmarks"
BUILT_CARDS = ("result/CARD.md", "build/CARD.md")
CARD = "CARD.md"


@dataclass(frozen=True)
class Add:
    path_in_repo: str
    source: Path | bytes

    def describe(self) -> str:
        origin = "rendered card" if isinstance(self.source, bytes) else display_path(self.source)
        return f"add    {self.path_in_repo}  ({origin})"


@dataclass(frozen=True)
class Delete:
    path_in_repo: str

    def describe(self) -> str:
        return f"delete {self.path_in_repo}"


Operation = Add | Delete


@dataclass(frozen=True)
class UploadOptions:
    repo_id: str | None = None
    branch: str | None = None
    private: bool = False
    create_pr: bool = False
    repo_type: str = "kernel"
    checks: CheckOptions = field(default_factory=CheckOptions)
    # The build to publish (a bundle or build tree); None: found under the directory.
    built: Path | None = None


@dataclass
class Release:
    """What the local files ask to publish, before looking at the Hub."""

    repo_id: str
    branch: str
    checked: list[CheckedVariant]
    card: Add | None
    benchmarks: list[Add]
    warnings: list[Diagnostic] = field(default_factory=list)

    @property
    def variants(self) -> list[Path]:
        return [checked.path for checked in self.checked]


@dataclass(frozen=True)
class RemoteState:
    """The target branch on the Hub: whether it exists, and its files (main's when new).

    `read` is False for a dry run, which never contacts the Hub: nothing is known.
    """

    branch_exists: bool
    files: tuple[str, ...]
    read: bool = True


NOT_READ = RemoteState(branch_exists=False, files=(), read=False)


@dataclass(frozen=True)
class Commit:
    branch: str
    message: str
    operations: tuple[Operation, ...]


def _load_project(directory: Path) -> LoadedConfig | None:
    return load_config(directory) if (directory / BUILD_TOML).is_file() else None


def resolve_repo_id(options: UploadOptions, loaded: LoadedConfig | None) -> str:
    hub = loaded.config.general.hub if loaded else None
    repo_id = options.repo_id or (hub.repo_id if hub else None)
    if not repo_id:
        raise UserError.single(
            "No `general.hub.repo-id` in build.toml. Use --repo-id to specify it.",
            file=display_path(loaded.path) if loaded else None,
            key="general.hub.repo-id",
            fix="pass --repo-id <owner>/<name>, or set `repo-id` in build.toml's `[general.hub]`",
        )
    return repo_id


def resolve_branch(
    options: UploadOptions, loaded: LoadedConfig | None, variants: list[CheckedVariant]
) -> str:
    hub = loaded.config.general.hub if loaded else None
    branch = options.branch or (hub.branch if hub else None)
    if branch:
        return branch
    versions = sorted({v.metadata.model.version for v in variants})
    if len(versions) > 1:
        raise UserError.single(
            "Found multiple versions in build variants: " + ", ".join(map(str, versions)),
            fix="rebuild every variant from the same build.toml, or pass --branch",
        )
    return f"v{versions[0]}"


def _card(
    directory: Path, built: Path | None, loaded: LoadedConfig | None, repo_id: str
) -> Add | None:
    """The card the build wrote (in the given build, else result/ or build/), else
    one rendered from the project's template."""
    written = [built / CARD] if built is not None else [directory / r for r in BUILT_CARDS]
    for path in written:
        if path.is_file():
            return Add("README.md", path)
    if loaded is None:
        return None
    return Add("README.md", render_card(loaded, repo_id).encode("utf-8"))


def _benchmarks(directory: Path, built: Path | None) -> list[Add]:
    """benchmark*.py of the given build (a bundle carries them), else of the project."""
    bases = [directory] if built is None else [built, directory]
    folder = next((b / BENCHMARKS for b in bases if (b / BENCHMARKS).is_dir()), None)
    if folder is None:
        return []
    return [
        Add(f"{BENCHMARKS}/{path.name}", path)
        for path in sorted(folder.glob("benchmark*.py"))
        if path.is_file()
    ]


def prepare_release(directory: Path, options: UploadOptions) -> Release:
    """Everything local: the checked variants, the repository, the branch, the card."""
    if options.repo_type not in REPO_TYPES:
        raise UserError.single(
            f"unknown repository type {options.repo_type!r}",
            key="--repo-type",
            fix=f"use one of: {', '.join(REPO_TYPES)}",
        )
    _require_repo_type(options.repo_type)
    loaded = _load_project(directory)
    repo_id = resolve_repo_id(options, loaded)
    built = options.built
    variants, warnings = checked_variants(
        built or directory, options.checks, exact=built is not None
    )
    card = _card(directory, built, loaded, repo_id)
    if card is None:
        warnings.append(
            Diagnostic(
                "no card to publish: README.md on main is left as it is",
                file=display_path(directory),
                fix="run upload from the kernel's directory (with build.toml)",
                severity="warning",
            )
        )
    return Release(
        repo_id=repo_id,
        branch=resolve_branch(options, loaded, variants),
        checked=variants,
        card=card,
        benchmarks=_benchmarks(directory, built),
        warnings=warnings,
    )


def _require_repo_type(repo_type: str) -> None:
    from huggingface_hub import __version__, constants

    if repo_type == "kernel" and getattr(constants, "REPO_TYPE_KERNEL", None) != "kernel":
        raise UserError.single(
            f"huggingface_hub {__version__} cannot create kernel repositories",
            key="--repo-type",
            fix="upgrade huggingface_hub, or pass --repo-type model",
        )


# ------------------------------------------------------------ the commits


def _variant_adds(variant: Path) -> list[Add]:
    prefix = f"{BUILD_PREFIX}{variant.name}/"
    return [Add(prefix + relative, variant / relative) for relative in shipped_files(variant)]


def _stale_builds(release: Release, remote: RemoteState, kept: set[str]) -> list[Delete]:
    prefixes = (
        (BUILD_PREFIX,)
        if not remote.branch_exists
        else tuple(f"{BUILD_PREFIX}{v.name}/" for v in release.variants)
    )
    return [Delete(path) for path in remote.files if path.startswith(prefixes) and path not in kept]


def _stale_benchmarks(remote: RemoteState, kept: set[str]) -> list[Delete]:
    """On a new branch every other file under benchmarks/; else benchmark*.py only."""
    return [
        Delete(path)
        for path in remote.files
        if path.startswith(f"{BENCHMARKS}/")
        and path not in kept
        and (not remote.branch_exists or path.rpartition("/")[2].startswith("benchmark"))
    ]


def branch_operations(release: Release, remote: RemoteState) -> list[Operation]:
    """The version branch: stale files deleted, then the variants and benchmarks added."""
    adds = [add for variant in release.variants for add in _variant_adds(variant)]
    adds += release.benchmarks
    kept = {add.path_in_repo for add in adds}
    deletes = _stale_builds(release, remote, kept) + _stale_benchmarks(remote, kept)
    return [*sorted(deletes, key=_path), *sorted(adds, key=_path)]


def _path(operation: Operation) -> str:
    return operation.path_in_repo


def _batches(branch: str, operations: list[Operation]) -> list[Commit]:
    chunks = [operations[i : i + BATCH_SIZE] for i in range(0, len(operations), BATCH_SIZE)]
    return [
        Commit(
            branch,
            COMMIT_MESSAGE
            if len(chunks) == 1
            else f"{COMMIT_MESSAGE[:-1]} (batch {number}/{len(chunks)}).",
            tuple(chunk),
        )
        for number, chunk in enumerate(chunks, start=1)
    ]


def plan_commits(release: Release, remote: RemoteState) -> list[Commit]:
    """The commits of an upload: the version branch first, then the card on main."""
    per_branch: dict[str, list[Operation]] = {release.branch: branch_operations(release, remote)}
    if release.card is not None:
        per_branch.setdefault(MAIN, []).append(release.card)
    return [commit for branch, ops in per_branch.items() for commit in _batches(branch, ops)]
