"""`kernelnix upload`: publish a kernel's build variants to the Hugging Face Hub.

This module talks to the Hub; what may be published is kernelnix.publish.gate's
verdict, and what is sent, kernelnix.publish.release's plan.

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

`fetch_variants` is the other direction, for `kernelnix reproduce`: the
variants of a kernel repository at a revision, downloaded with
huggingface_hub's snapshot_download (HF_ENDPOINT, HF_HUB_OFFLINE and its cache
as for any download), only those asked for.
"""

from __future__ import annotations

import os
import re
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kernelnix.core.diagnostics import UserError
from kernelnix.host.network import hub_endpoint, network_errors
from kernelnix.publish.release import (
    MAIN,
    NOT_READ,
    Commit,
    Delete,
    Operation,
    Release,
    RemoteState,
    UploadOptions,
    plan_commits,
    prepare_release,
)


class HubError(Exception):
    """The Hub could not be reached, or refused a request."""


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


# ------------------------------------------------------------- the Hub side


@contextmanager
def _hub_step(what: str) -> Iterator[None]:
    try:
        yield
    except network_errors() as exc:
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
        except network_errors() as exc:
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
        url = _repo_url(hub_endpoint(), options.repo_type, release.repo_id, release.branch)
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


# ---------------------------------------------------------- reading variants

# As the `kernels` loader downloads a variant: bytecode is never fetched.
BYTECODE_PATTERNS = ["*.pyc", "**/__pycache__/**"]
LOCAL_FIX = "or compare with a bundle directory on this machine"


@dataclass(frozen=True)
class HubVariants:
    """A kernel repository's variants at a revision: every name under build/, and,
    offline, the cached snapshot's build/ folder (None online: nothing is
    downloaded before the variants compared are known)."""

    repo_id: str
    revision: str
    names: tuple[str, ...]
    build_dir: Path | None


def list_variants(repo_id: str, revision: str | None, version: int | None) -> HubVariants:
    """The variants of kernel repository `repo_id` at `revision` (None: the branch
    v<version> when it exists, the newest v<N> for no version, else main),
    downloading nothing. Offline
    (HF_HUB_OFFLINE), the cache answers. A repository or revision that does not
    exist, or a Hub that does not answer, is a UserError."""
    from huggingface_hub import constants

    if constants.HF_HUB_OFFLINE:
        return _cached_variants(repo_id, revision, version)
    api = default_api(require_token=False)
    with _hub_errors(repo_id, revision):
        revision = revision or _default_revision(api, repo_id, version)
        names = _variant_names(api, repo_id, revision)
    return HubVariants(repo_id, revision, names, None)


def download_variants(listed: HubVariants, wanted: Collection[str]) -> Path | None:
    """The build/ folder holding the variants of `listed` named in `wanted`
    (downloaded; offline, the cached snapshot's), or None when it lists none of them."""
    fetched = [name for name in listed.names if name in wanted]
    if not fetched:
        return None
    if listed.build_dir is not None:  # offline: the cached snapshot, which lists what it holds
        return listed.build_dir
    api = default_api(require_token=False)
    with _hub_errors(listed.repo_id, listed.revision):
        root = api.snapshot_download(
            listed.repo_id,
            repo_type="kernel",
            revision=listed.revision,
            allow_patterns=_variant_patterns(fetched),
            ignore_patterns=BYTECODE_PATTERNS,
        )
    return Path(root) / "build"


def _variant_patterns(names: Collection[str] | None) -> list[str]:
    """The files of these variants (None: of every variant), as snapshot_download matches them."""
    return ["build/*"] if names is None else [f"build/{name}/*" for name in names]


def _default_revision(api: Any, repo_id: str, version: int | None) -> str:
    """The branch v<version> when it exists (version None: the newest v<N>), else main."""
    branches = {ref.name for ref in api.list_repo_refs(repo_id, repo_type="kernel").branches}
    if version is None:
        versions = [int(b[1:]) for b in branches if re.fullmatch(r"v[0-9]+", b)]
        return f"v{max(versions)}" if versions else MAIN
    return f"v{version}" if f"v{version}" in branches else MAIN


def _variant_names(api: Any, repo_id: str, revision: str) -> tuple[str, ...]:
    from huggingface_hub import RepoFolder
    from huggingface_hub.errors import EntryNotFoundError

    try:
        tree = list(
            api.list_repo_tree(repo_id, path_in_repo="build", repo_type="kernel", revision=revision)
        )
    except EntryNotFoundError:  # no build/ folder: no variants
        return ()
    return tuple(sorted(item.path.split("/")[-1] for item in tree if isinstance(item, RepoFolder)))


def _cached_variants(repo_id: str, revision: str | None, version: int | None) -> HubVariants:
    """The variants of the cached snapshot of `repo_id` (HF_HUB_OFFLINE) at
    `revision`, else at v<version> or main: those some download put there."""
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    versions = [] if version is None else [f"v{version}"]
    candidates = [revision] if revision else [*versions, MAIN]
    for candidate in candidates:
        try:
            root = snapshot_download(
                repo_id,
                repo_type="kernel",
                revision=candidate,
                allow_patterns=["build/*/metadata.json"],
                ignore_patterns=BYTECODE_PATTERNS,
            )
        except LocalEntryNotFoundError:  # not cached
            continue
        build = Path(root) / "build"
        names = sorted(d.name for d in build.iterdir() if d.is_dir()) if build.is_dir() else []
        return HubVariants(repo_id, candidate, tuple(names), build)
    raise _not_cached(repo_id, candidates)


def _not_cached(repo_id: str, candidates: Sequence[str]) -> UserError:
    return UserError.single(
        f"HF_HUB_OFFLINE is set and the Hugging Face cache holds no snapshot of {repo_id} "
        f"at {' or '.join(candidates)} with the variants compared",
        key="--against",
        fix=f"unset HF_HUB_OFFLINE to download it, {LOCAL_FIX}",
    )


@contextmanager
def _hub_errors(repo_id: str, revision: str | None) -> Iterator[None]:
    """A missing repository or revision, or an unreachable Hub, as one UserError."""
    from huggingface_hub.errors import RepositoryNotFoundError, RevisionNotFoundError

    try:
        yield
    except RevisionNotFoundError as exc:
        raise UserError.single(
            f"the kernel repository {repo_id} has no revision {revision!r}",
            key="--revision",
            fix="pass a branch, tag or commit of it (such as v1 or main), or leave "
            "--revision out for the kernel's version branch",
        ) from exc
    except RepositoryNotFoundError as exc:
        raise UserError.single(
            f"{repo_id} is neither a directory nor a kernel repository on {hub_endpoint()}",
            key="--against",
            fix=f"check the name (owner/name; a private repository needs HF_TOKEN), {LOCAL_FIX}",
        ) from exc
    except network_errors() as exc:
        raise UserError.single(
            f"cannot read {repo_id} from {hub_endpoint()}: {exc}",
            key="--against",
            fix=f"check the network and HF_ENDPOINT, {LOCAL_FIX}",
        ) from exc
