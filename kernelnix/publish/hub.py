"""`kernelnix upload`: publish a kernel's build variants to the Hugging Face Hub.

As the reference does it:

- repository: `--repo-id`, else `general.hub.repo-id`; type `kernel` unless told;
- branch: `--branch`, else `general.hub.branch`, else `v<version>` of the variants;
- on that branch: `build/<variant>/...` for every variant and
  `benchmarks/benchmark*.py`; stale files under `build/` are deleted (all of
  them on a new branch, else only inside the uploaded variants), and so are
  stale benchmarks;
- on `main`: the card as README.md (`result/CARD.md` or `build/CARD.md` when the
  build wrote one, else rendered from the project's CARD.md template);
- at most 1000 operations per commit.

What is published is gated on the checks' verdict, not on who built it: every
variant is checked under the publishing policy (the default, `kernel`: loads
on glibc 2.27 and newer, no dynamic libstdc++), whichever toolchain built it,
and its provenance (toolchain, the policy its build passed) is reported. A
noarch variant has no native code, so only its Python, layout and metadata
rules apply. A variant that fails the checks, whose metadata.json does not
validate, whose recorded digest is stale, or that is a development build
(`--cuda-archs`) is refused before anything is sent, with every violation and
its fix. Variants built from a dirty git tree are published with a warning.

The variants come from DIRECTORY (result/, else build/, else DIRECTORY itself,
as `kernelnix check` finds them) unless `built` names the build to publish:
`build-and-upload` passes the bundle it has just built, so a stale `result`
link can never change what is pushed. A dry run never contacts the Hub: it
shows what would be pushed to which branch and which checks ran, and says
that the branch's current files (which a real upload would delete when stale)
were not read.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from kernelnix.checks import DEFAULT_POLICY, CheckOptions, CheckReport, run_checks
from kernelnix.checks.runner import discover_variants
from kernelnix.config import LoadedConfig, load_config
from kernelnix.config.load import BUILD_TOML
from kernelnix.core.diagnostics import Diagnostic, UserError, display_path
from kernelnix.emit.card import render_card
from kernelnix.plan.metadata import VariantMetadata
from kernelnix.publish.digest import shipped_files, stale_digest, valid_metadata

MAIN = "main"
BATCH_SIZE = 1000
REPO_TYPES = ("kernel", "model")
COMMIT_MESSAGE = "Uploaded using `kernelnix`."
BUILD_PREFIX = "build/"
BENCHMARKS = "benchmarks"
BUILT_CARDS = ("result/CARD.md", "build/CARD.md")
CARD = "CARD.md"
PUBLISHING_REASON = (
    "the publishing policy: what the Hub serves must load on every supported machine"
)


class HubError(Exception):
    """The Hub could not be reached, or refused a request."""


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


@dataclass(frozen=True)
class CheckedVariant:
    """A variant that passed the checks, with what they ran and its provenance."""

    metadata: VariantMetadata
    report: CheckReport

    @property
    def path(self) -> Path:
        return self.metadata.path.parent

    @property
    def toolchain(self) -> str | None:
        """The toolchain that built it; None when not built by kernelnix."""
        return self.metadata.model.own.toolchain if self.metadata.model.own else None

    @property
    def built_policy(self) -> str | None:
        """The policy its build held it to, as metadata.json records it."""
        return self.metadata.model.own.policy if self.metadata.model.own else None

    def describe(self) -> str:
        settings = self.report.settings
        built = (
            f"built with the {self.toolchain} toolchain"
            + (f", which checked it under {self.built_policy}" if self.built_policy else "")
            if self.toolchain
            else "no kernelnix provenance"
        )
        imported = "imported through kernels" if settings.get("import") else "import not checked"
        return (
            f"{self.path.name}: ok under policy {settings['policy']}, "
            f"{len(self.report.files_checked)} files, {imported}; {built}"
        )


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


@dataclass(frozen=True)
class Pushed:
    """A commit the Hub made: its id and page, and the pull request it opened or joined."""

    oid: str
    url: str
    pull_request: str | None


@dataclass
class UploadResult:
    release: Release
    remote: RemoteState
    commits: list[Commit]
    url: str
    dry_run: bool
    pushed: list[Pushed] = field(default_factory=list)  # one per commit; none in a dry run

    def summary(self) -> dict[str, Any]:
        """What `upload --output-json` writes."""
        pushed: list[Pushed | None] = [None] * len(self.commits) if self.dry_run else [*self.pushed]
        return {
            "repo-id": self.release.repo_id,
            "branch": self.release.branch,
            "new-branch": not self.remote.branch_exists if self.remote.read else None,
            "remote-read": self.remote.read,
            "url": self.url,
            "dry-run": self.dry_run,
            "variants": [variant.name for variant in self.release.variants],
            "checks": {
                checked.path.name: {
                    "settings": checked.report.settings,
                    "toolchain": checked.toolchain,
                    "built-policy": checked.built_policy,
                }
                for checked in self.release.checked
            },
            "commits": [
                {
                    "branch": commit.branch,
                    "message": commit.message,
                    "operations": len(commit.operations),
                    "oid": done.oid if done else None,
                    "url": done.url if done else None,
                    "pull-request": done.pull_request if done else None,
                }
                for commit, done in zip(self.commits, pushed, strict=True)
            ],
        }


# ------------------------------------------------------------- local side


def publishing_checks(options: CheckOptions) -> CheckOptions:
    """`options` (python ABI, import check, ...) under the publishing policy."""
    return replace(
        options,
        policy=DEFAULT_POLICY,
        policy_reason=PUBLISHING_REASON,
        follow_record=False,
        redistributable=True,
    )


def _check_failures(report: CheckReport) -> list[Diagnostic]:
    return [
        Diagnostic(
            f"{v.rule}: {v.describe()} (policy {report.settings['policy']})",
            file=display_path(report.variant_dir / v.file),
            fix=v.fix,
        )
        for v in report.errors
    ]


def _stale_digest(metadata: VariantMetadata) -> list[Diagnostic]:
    return [
        Diagnostic(
            f"digest: {problem}",
            file=display_path(metadata.path),
            fix="rehash after the last change (kernelnix hash), or rebuild the variant",
        )
        for problem in stale_digest(metadata.path.parent, metadata.model)
    ]


def _loader_objection(metadata: VariantMetadata) -> list[Diagnostic]:
    """What the `kernels` loader's own parser says; nothing when it is not installed."""
    try:
        from kernels._rust import Metadata as LoaderMetadata  # type: ignore[import-untyped]
    except ImportError:
        return []
    try:
        LoaderMetadata.read_from_file(metadata.path)
    except ValueError as exc:
        return [
            Diagnostic(
                f"the kernels loader cannot parse it: {exc}",
                file=display_path(metadata.path),
                fix="rebuild the variant so that the build writes its metadata.json",
            )
        ]
    return []


def _development_build(metadata: VariantMetadata) -> list[Diagnostic]:
    own = metadata.model.own
    if own is None or not own.development_archs:
        return []
    return [
        Diagnostic(
            f"a development build for CUDA archs {', '.join(own.development_archs)} only "
            "(--cuda-archs): it lacks the other archs the variant is published with",
            file=display_path(metadata.path),
            key="provenance.kernelnix.development-archs",
            fix="rebuild without --cuda-archs",
        )
    ]


def _refusals(report: CheckReport, metadata: VariantMetadata) -> list[Diagnostic]:
    """Why a checked variant must not be published; [] when it may."""
    return [
        *_check_failures(report),
        *_stale_digest(metadata),
        *_loader_objection(metadata),
        *_development_build(metadata),
    ]


def _dirty_warning(metadata: VariantMetadata) -> Diagnostic | None:
    provenance = metadata.model.provenance
    if provenance is None:
        return None
    if not ((provenance.kernel and provenance.kernel.dirty) or provenance.kernel_builder.dirty):
        return None
    return Diagnostic(
        "built from a git tree with uncommitted changes (provenance: dirty)",
        file=display_path(metadata.path),
        fix="commit the changes and rebuild before publishing",
        severity="warning",
    )


def checked_variants(
    source: Path, options: CheckOptions, *, exact: bool = False
) -> tuple[list[CheckedVariant], list[Diagnostic]]:
    """The variants under `source`, each checked under the publishing policy, and the
    dirty-tree warnings. `exact`: `source` is the build itself (its variants are its
    sub-directories, or itself), never a project holding result/ or build/.

    UserError listing every refusal when a variant may not be published.
    """
    checks = publishing_checks(options)
    found: list[tuple[VariantMetadata, CheckReport]] = []
    problems: list[Diagnostic] = []
    for variant in discover_variants(source, exact=exact):
        try:
            metadata = valid_metadata(variant)
        except UserError as exc:
            problems += exc.diagnostics
            continue
        report = run_checks(variant, checks)
        problems += _refusals(report, metadata)
        found.append((metadata, report))
    if problems:
        raise UserError(problems)
    warnings = [w for w in (_dirty_warning(m) for m, _ in found) if w is not None]
    return [CheckedVariant(metadata, report) for metadata, report in found], warnings


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


# ------------------------------------------------------------- the Hub side


def _network_errors() -> tuple[type[Exception], ...]:
    """OSError (huggingface_hub's HTTP errors, offline mode) and its HTTP client's errors."""
    clients = (sys.modules.get(name) for name in ("httpx2", "httpx"))
    return (OSError, *(client.HTTPError for client in clients if client is not None))


@contextmanager
def _hub_step(what: str) -> Iterator[None]:
    try:
        yield
    except _network_errors() as exc:
        raise HubError(f"{what}: {exc}") from exc


def read_remote(api: Any, repo_id: str, repo_type: str, branch: str) -> RemoteState:
    """The branch's state; a repository that does not exist yet has no files."""
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    with _hub_step(f"cannot list the branches of {repo_id}"):
        try:
            refs = api.list_repo_refs(repo_id, repo_type=repo_type)
        except RepositoryNotFoundError:
            return RemoteState(branch_exists=False, files=())
    exists = any(ref.name == branch for ref in refs.branches)
    with _hub_step(f"cannot list the files of {repo_id}"):
        try:
            files = api.list_repo_files(
                repo_id, revision=branch if exists else MAIN, repo_type=repo_type
            )
        except RevisionNotFoundError:
            files = []
    return RemoteState(branch_exists=exists, files=tuple(sorted(files)))


def _hf_operation(operation: Operation) -> Any:
    from huggingface_hub import CommitOperationAdd, CommitOperationDelete

    if isinstance(operation, Delete):
        return CommitOperationDelete(path_in_repo=operation.path_in_repo)
    source = operation.source
    return CommitOperationAdd(
        path_in_repo=operation.path_in_repo,
        path_or_fileobj=source if isinstance(source, bytes) else str(source),
    )


def push(
    api: Any, repo_id: str, repo_type: str, commits: list[Commit], create_pr: bool
) -> list[Pushed]:
    """Send the commits; with `create_pr`, one pull request per branch collects its batches."""
    pull_requests: dict[str, str] = {}
    pushed: list[Pushed] = []
    for commit in commits:
        opens_pr = create_pr and commit.branch not in pull_requests
        with _hub_step(f"cannot commit to branch `{commit.branch}` of {repo_id}"):
            info = api.create_commit(
                repo_id,
                operations=[_hf_operation(op) for op in commit.operations],
                commit_message=commit.message,
                revision=pull_requests.get(commit.branch, commit.branch),
                repo_type=repo_type,
                create_pr=opens_pr,
            )
        if opens_pr:
            pull_requests[commit.branch] = info.pr_revision
        pushed.append(Pushed(info.oid, info.commit_url, info.pr_url))
    return pushed


def _repo_url(endpoint: str, repo_type: str, repo_id: str, branch: str) -> str:
    prefix = "" if repo_type == "model" else f"{repo_type}s/"
    return f"{endpoint}/{prefix}{repo_id}/tree/{branch}"


def _endpoint() -> str:
    """The Hub's address without asking it (HF_ENDPOINT, else huggingface_hub's)."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def _create(api: Any, release: Release, options: UploadOptions) -> str:
    """Create the repository (if needed) and the branch (if new); the canonical repo id."""
    with _hub_step(f"cannot create the repository {release.repo_id}"):
        url = api.create_repo(
            release.repo_id,
            repo_type=options.repo_type,
            private=options.private or None,
            exist_ok=True,
        )
    return str(url.repo_id or release.repo_id)


def default_api(require_token: bool) -> Any:
    """An HfApi for HF_ENDPOINT (read now, not at import) and the logged-in token."""
    from huggingface_hub import HfApi, get_token

    if require_token and get_token() is None:
        raise UserError.single(
            "not logged in to the Hugging Face Hub",
            fix="run `hf auth login`, or set HF_TOKEN to a token with write access",
        )
    return HfApi(endpoint=os.environ.get("HF_ENDPOINT") or None)


NAME_FIX = "pass --name <owner>/<repo>"


def hub_user() -> str:
    """The user logged in to the Hub (`whoami`): the owner of a kernel `init`
    names without `--name`. UserError with that fix when the Hub cannot tell."""
    from huggingface_hub import constants
    from huggingface_hub.errors import LocalTokenNotFoundError

    fix = NAME_FIX
    if constants.HF_HUB_OFFLINE:
        problem = "HF_HUB_OFFLINE is set, so the Hub cannot tell who you are"
    else:
        try:
            return str(default_api(require_token=False).whoami()["name"])
        except LocalTokenNotFoundError:
            problem = "not logged in to the Hugging Face Hub, so it cannot tell who you are"
            fix = f"run `hf auth login`, or {NAME_FIX}"
        except _network_errors() as exc:
            problem = f"cannot ask the Hub who you are: {exc}"
    raise UserError.single(f"no owner for the kernel: {problem}", key="--name", fix=fix)


def upload(
    directory: Path, options: UploadOptions, *, dry_run: bool = False, api: Any = None
) -> UploadResult:
    """Check, plan and (unless `dry_run`) send the upload of `directory`'s variants.

    A dry run never contacts the Hub (it works offline): its commits hold the
    additions only, since the stale files a real upload deletes are not known.
    """
    release = prepare_release(directory, options)
    if dry_run:
        commits = plan_commits(release, NOT_READ)
        url = _repo_url(_endpoint(), options.repo_type, release.repo_id, release.branch)
        return UploadResult(release, NOT_READ, commits, url, dry_run)
    api = api or default_api(require_token=True)
    repo_id = release.repo_id = _create(api, release, options)
    remote = read_remote(api, repo_id, options.repo_type, release.branch)
    commits = plan_commits(release, remote)
    if not remote.branch_exists and release.branch != MAIN:
        with _hub_step(f"cannot create branch `{release.branch}` of {repo_id}"):
            api.create_branch(repo_id, branch=release.branch, repo_type=options.repo_type)
    pushed = push(api, repo_id, options.repo_type, commits, options.create_pr)
    url = _repo_url(api.endpoint, options.repo_type, repo_id, release.branch)
    return UploadResult(release, remote, commits, url, dry_run, pushed)
