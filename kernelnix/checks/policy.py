"""Binary policies: symbol-version ceilings and allowed shared libraries.

Policies are data. `kernel` (the default) lives in kernelnix/data/policies/;
the `manylinux_*` levels come from the policy file of the installed
`auditwheel` package (the same data the reference checker vendors), so they
follow auditwheel's updates without a code change.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from importlib import resources
from typing import Any

from kernelnix.core.version import Version

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
    """Raise UnknownPolicyError unless `name` names a policy (or a manylinux alias)."""
    if name in _own_policies() or _manylinux_aliases().get(name, name) in _manylinux_policies():
        return
    load_policy(name, "x86_64")  # raises with the list of valid names


def policy_names() -> list[str]:
    """Every selectable policy name: kernelnix's own, then auditwheel's manylinux levels."""
    return [*sorted(_own_policies()), *_manylinux_policies()]


@cache
def load_policy(name: str, arch: str) -> Policy:
    """The policy `name` for CPU `arch` (`x86_64`, `aarch64`, ...); cached with its verdicts."""
    own = _own_policies()
    if name in own:
        return _policy_from_own(own[name])
    manylinux = _manylinux_policies()
    canonical = _manylinux_aliases().get(name, name)
    if canonical not in manylinux:
        hint = "" if manylinux else " (manylinux policies need the `auditwheel` package)"
        raise UnknownPolicyError(
            f"unknown policy {name!r}; valid policies: {', '.join(policy_names())}{hint}"
        )
    return _policy_from_manylinux(manylinux[canonical], arch)


@cache
def _own_policies() -> dict[str, dict[str, Any]]:
    folder = resources.files("kernelnix").joinpath("data", "policies")
    result: dict[str, dict[str, Any]] = {}
    for entry in folder.iterdir():
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_text(encoding="utf-8"))
            result[data["name"]] = data
    return result


@cache
def _manylinux_policies() -> dict[str, dict[str, Any]]:
    """auditwheel's manylinux policies by name; empty when auditwheel is absent."""
    try:
        root = resources.files("auditwheel")
    except ModuleNotFoundError:
        return {}
    for relative in _AUDITWHEEL_FILES:
        entry = root.joinpath(*relative.split("/"))
        if entry.is_file():
            entries = json.loads(entry.read_text(encoding="utf-8"))
            return {p["name"]: p for p in entries if p["name"].startswith("manylinux_")}
    return {}


@cache
def _manylinux_aliases() -> dict[str, str]:
    return {
        alias: name
        for name, policy in _manylinux_policies().items()
        for alias in policy.get("aliases", [])
    }


def _policy_from_own(data: Mapping[str, Any]) -> Policy:
    return Policy(
        name=data["name"],
        description=data.get("description", ""),
        max_versions={ns: Version.parse(v) for ns, v in data["max_symbol_versions"].items()},
        named_versions={
            ns: frozenset(v) for ns, v in data.get("named_symbol_versions", {}).items()
        },
        allowed_libraries=frozenset(data.get("allowed_libraries", [])),
        forbidden_libraries=dict(data.get("forbidden_libraries", {})),
        forbidden_symbols={
            lib: frozenset(v) for lib, v in data.get("forbidden_symbols", {}).items()
        },
    )


def _policy_from_manylinux(data: Mapping[str, Any], arch: str) -> Policy:
    per_arch = data["symbol_versions"]
    if arch not in per_arch:
        raise PolicyError(
            f"policy {data['name']} has no data for {arch} "
            f"(it covers {', '.join(sorted(per_arch)) or 'no architecture'})"
        )
    max_versions: dict[str, Version] = {}
    named: dict[str, frozenset[str]] = {}
    for namespace, versions in per_arch[arch].items():
        numeric, other = _split_versions(versions)
        if numeric:
            # A ceiling rather than auditwheel's exact set: real libraries have
            # no symbols in the set's gaps (e.g. GLIBC 2.19-2.21 on x86_64).
            max_versions[namespace] = max(numeric)
        if other:
            named[namespace] = frozenset(other)
    return Policy(
        name=data["name"],
        description=f"auditwheel's {data['name']} policy",
        max_versions=max_versions,
        named_versions=named,
        allowed_libraries=frozenset(data.get("lib_whitelist", [])),
        forbidden_libraries={},
        forbidden_symbols={lib: frozenset(v) for lib, v in data.get("blacklist", {}).items()},
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
