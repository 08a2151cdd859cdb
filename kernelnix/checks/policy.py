"""Binary policies: symbol-version ceilings and allowed shared libraries.

Policies are data in auditwheel's policy format (kernelnix/checks/policy_file.py),
read and validated by one loader. `kernel` (the default) lives in
kernelnix/data/policies/; the `manylinux_*` levels come from the policy file of
the installed `auditwheel` package (the same data the reference checker
vendors), so they follow auditwheel's updates without a code change.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import TYPE_CHECKING

from kernelnix.core.version import Version

if TYPE_CHECKING:
    from importlib.resources.abc import Traversable  # Python 3.11+: only for type checking

    from kernelnix.checks.policy_file import PolicyEntry

DEFAULT_POLICY = "kernel"
_AUDITWHEEL_FILES = ("policy/manylinux-policy.json", "policy/policy.json")


class PolicyError(ValueError):
    """A policy that cannot be used: unknown, or without data for an architecture."""


class UnknownPolicyError(PolicyError):
    """No policy has this name (bad input)."""


@dataclass(frozen=True)
class VersionVerdict:
    """How one symbol version (`GLIBC_2.34`) fares against a policy."""

    namespace: str
    version: str
    allowed: bool
    numeric: bool
    limit: str  # what the policy allows, for messages


@dataclass(frozen=True)
class Policy:
    """One policy, resolved for one CPU architecture."""

    name: str
    description: str
    max_versions: Mapping[str, Version]
    named_versions: Mapping[str, frozenset[str]]
    allowed_libraries: frozenset[str]
    forbidden_libraries: Mapping[str, str]
    forbidden_symbols: Mapping[str, frozenset[str]]
    _verdicts: dict[str, VersionVerdict | None] = field(
        default_factory=dict, compare=False, repr=False
    )
    # Versions judged allowed or not governed: most libraries need only these,
    # and a set difference (in C) clears them all at once.
    _accepted: set[str] = field(default_factory=set, compare=False, repr=False)

    def rejected(self, versions: set[str]) -> dict[str, VersionVerdict]:
        """The versions among `versions` that this policy rejects, with their verdicts."""
        bad: dict[str, VersionVerdict] = {}
        for version in versions - self._accepted:
            verdict = self.judge(version)
            if verdict is None or verdict.allowed:
                self._accepted.add(version)
            else:
                bad[version] = verdict
        return bad

    def judge(self, version_string: str) -> VersionVerdict | None:
        """Verdict for `NAMESPACE_VERSION`; None when the policy does not govern it."""
        try:
            return self._verdicts[version_string]
        except KeyError:
            verdict = self._verdicts[version_string] = self._judge(version_string)
            return verdict

    def _judge(self, version_string: str) -> VersionVerdict | None:
        namespace, _, version = version_string.partition("_")
        ceiling = self.max_versions.get(namespace)
        named = self.named_versions.get(namespace, frozenset())
        if not version or (ceiling is None and not named):
            return None  # e.g. `libcudart.so.13`, `LIBFOO_1.0`: not governed
        limit = self.limit_text(namespace)
        try:
            parsed = Version.parse(version)
        except ValueError:
            return VersionVerdict(namespace, version, version in named, False, limit)
        allowed = ceiling is not None and parsed <= ceiling
        return VersionVerdict(namespace, version, allowed, True, limit)

    def limit_text(self, namespace: str) -> str:
        ceiling = self.max_versions.get(namespace)
        named = sorted(self.named_versions.get(namespace, ()))
        parts = [f"{namespace} <= {_dotted(ceiling)}"] if ceiling is not None else []
        parts += [f"{namespace}_{n}" for n in named]
        return ", ".join(parts) if parts else f"no {namespace} symbols"


def _dotted(version: Version) -> str:
    """`2.27`, `7.0.0`: keep at least two components, as glibc writes them."""
    text = str(version)
    return text if "." in text else f"{text}.0"


def check_policy_name(name: str) -> None:
    """Raise UnknownPolicyError unless `name` names a policy (or an alias of one)."""
    _policy_entry(name)


def policy_names() -> list[str]:
    """Every selectable policy name: kernelnix's own, then auditwheel's manylinux levels."""
    return [*sorted(_own_policies()), *_manylinux_policies()]


@cache
def load_policy(name: str, arch: str) -> Policy:
    """The policy `name` for CPU `arch` (`x86_64`, `aarch64`, ...); cached with its verdicts."""
    return _resolve(_policy_entry(name), arch)


def _policy_entry(name: str) -> PolicyEntry:
    canonical = _aliases().get(name, name)
    entry = _own_policies().get(canonical) or _manylinux_policies().get(canonical)
    if entry is None:
        hint = (
            "" if _manylinux_policies() else " (manylinux policies need the `auditwheel` package)"
        )
        raise UnknownPolicyError(
            f"unknown policy {name!r}; valid policies: {', '.join(policy_names())}{hint}"
        )
    return entry


@cache
def _own_policies() -> dict[str, PolicyEntry]:
    folder = resources.files("kernelnix").joinpath("data", "policies")
    return _read_policies(
        sorted(
            (entry for entry in folder.iterdir() if entry.name.endswith(".json")),
            key=lambda entry: entry.name,
        )
    )


@cache
def _manylinux_policies() -> dict[str, PolicyEntry]:
    """auditwheel's manylinux policies by name; empty when auditwheel is absent."""
    try:
        root = resources.files("auditwheel")
    except ModuleNotFoundError:
        return {}
    for relative in _AUDITWHEEL_FILES:
        entry = root.joinpath(*relative.split("/"))
        if entry.is_file():
            policies = _read_policies([entry])
            return {name: p for name, p in policies.items() if name.startswith("manylinux_")}
    return {}


@cache
def _aliases() -> dict[str, str]:
    policies = [*_own_policies().values(), *_manylinux_policies().values()]
    return {alias: policy.name for policy in policies for alias in policy.aliases}


def _read_policies(files: list[Traversable]) -> dict[str, PolicyEntry]:
    # Imported here: pydantic is loaded only by the commands that check binaries.
    from kernelnix.checks.policy_file import read_policy_files

    return read_policy_files(files)


def _resolve(entry: PolicyEntry, arch: str) -> Policy:
    """The policy for one CPU architecture, its version lists turned into ceilings."""
    per_arch = entry.symbol_versions
    if arch not in per_arch:
        raise PolicyError(
            f"policy {entry.name} has no data for {arch} "
            f"(it covers {', '.join(sorted(per_arch)) or 'no architecture'})"
        )
    max_versions: dict[str, Version] = {}
    named: dict[str, frozenset[str]] = {}
    for namespace, versions in per_arch[arch].items():
        numeric, other = _split_versions(versions)
        if numeric:
            # A ceiling rather than the exact set: real libraries have no
            # symbols in the set's gaps (e.g. GLIBC 2.19-2.21 on x86_64).
            max_versions[namespace] = max(numeric)
        if other:
            named[namespace] = frozenset(other)
    return Policy(
        name=entry.name,
        description=entry.kernelnix_description or f"auditwheel's {entry.name} policy",
        max_versions=max_versions,
        named_versions=named,
        allowed_libraries=frozenset(entry.lib_whitelist),
        forbidden_libraries=dict(entry.kernelnix_forbidden_libraries),
        forbidden_symbols={lib: frozenset(v) for lib, v in entry.blacklist.items()},
    )


def _split_versions(versions: list[str]) -> tuple[list[Version], list[str]]:
    numeric: list[Version] = []
    other: list[str] = []
    for text in versions:
        try:
            numeric.append(Version.parse(text))
        except ValueError:
            other.append(text)
    return numeric, other
