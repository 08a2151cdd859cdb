"""Inputs of a check run: the options a caller picks and what is read from the variant."""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kernelnix.checks.policy import DEFAULT_POLICY
from kernelnix.core.version import Version
from kernelnix.plan.metadata import Metadata, MetadataRead, read_metadata
from kernelnix.variants.names import VariantName, parse_variant_name

if TYPE_CHECKING:
    from kernelnix.checks.import_check import ImportChild

DEFAULT_PYTHON_ABI = "3.9"
IMPORT_TIMEOUT = 300.0  # seconds the import check may take
# Deployment targets: the reference's default for CPU builds, and the macOS
# release the loader requires for Metal variants.
MACOS_MIN_CPU = Version.parse("15.0")
MACOS_MIN_METAL = Version.parse("26.0")


@dataclass(frozen=True)
class CheckOptions:
    """What a caller (the build step or `kernelnix check`) asks for.

    `None` means "derive it from the variant": the stable-ABI target from a
    `torch-stable-abi<V>-…` directory name, the macOS minimum from the backend
    (26.0 for Metal, 15.0 otherwise).
    """

    policy: str = DEFAULT_POLICY
    # Why this policy: printed with every verdict.
    policy_reason: str = "the default policy"
    # Take policy and redistributable from metadata.json when the build recorded
    # them (`kernelnix check` without --policy): the build's own verdict.
    follow_record: bool = False
    python_abi: str = DEFAULT_PYTHON_ABI
    stable_abi: Version | None = None
    macos_min: Version | None = None
    redistributable: bool = True
    python_depends: tuple[str, ...] = ()  # extra allowed import names
    import_check: bool = True
    # The variant's kernel dependencies for the import, in the loader's LOCAL_KERNELS
    # form (`repo-id=folder:...`); None: none (the caller's LOCAL_KERNELS never leaks in).
    local_kernels: str | None = None
    python: str | None = None  # interpreter for the import check; default: this one
    import_timeout: float = IMPORT_TIMEOUT
    # An import check interpreter the caller started ahead (the build step does,
    # before it compiles); None: the check starts its own.
    import_child: ImportChild | None = field(default=None, compare=False)

    def settings(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "policy-reason": self.policy_reason,
            "python-abi": self.python_abi,
            "torch-stable-abi": str(self.stable_abi) if self.stable_abi else None,
            "macos": str(self.macos_min) if self.macos_min else None,
            "redistributable": self.redistributable,
            "import": self.import_check,
        }


@dataclass
class VariantFiles:
    """Everything under a variant directory, as `/`-separated relative paths."""

    files: list[str] = field(default_factory=list)
    dirs: list[str] = field(default_factory=list)
    symlinks: list[str] = field(default_factory=list)
    special: list[str] = field(default_factory=list)


@dataclass
class VariantContext:
    """One variant directory and everything the rules share about it."""

    variant_dir: Path
    options: CheckOptions
    listing: VariantFiles
    name: VariantName | None
    name_error: str | None
    metadata_read: MetadataRead
    notes: list[str] = field(default_factory=list)  # things the report should mention

    @property
    def metadata(self) -> dict[str, Any] | None:
        """metadata.json's JSON object as written, whether or not the model holds."""
        return self.metadata_read.raw

    @property
    def metadata_error(self) -> str | None:
        """Why there is no JSON object: missing, unreadable, not an object."""
        return self.metadata_read.error

    @property
    def backend(self) -> str | None:
        """metadata.json's backend.type, else the backend the directory name encodes."""
        backend = (self.metadata or {}).get("backend")
        if isinstance(backend, dict) and isinstance(backend.get("type"), str):
            return backend["type"]
        return self.name.backend if self.name else None

    @property
    def is_noarch(self) -> bool:
        return self.name is not None and self.name.kind == "noarch"

    @property
    def cpu(self) -> str | None:
        system = self.name.system if self.name else None
        return system.partition("-")[0] if system else None

    @property
    def os_name(self) -> str | None:
        system = self.name.system if self.name else None
        return system.partition("-")[2] if system else None

    @property
    def kernel_name(self) -> str | None:
        name = (self.metadata or {}).get("name")
        return name if isinstance(name, str) else None

    @property
    def kernel_id(self) -> str | None:
        kernel_id = (self.metadata or {}).get("id")
        return kernel_id if isinstance(kernel_id, str) else None

    @property
    def python_depends(self) -> list[str]:
        depends = (self.metadata or {}).get("python-depends")
        return [d for d in depends if isinstance(d, str)] if isinstance(depends, list) else []

    @property
    def stable_abi(self) -> Version | None:
        if self.options.stable_abi is not None:
            return self.options.stable_abi
        if self.name is not None and self.name.kind == "stable-abi":
            return self.name.framework_version
        return None

    @property
    def macos_min(self) -> Version:
        if self.options.macos_min is not None:
            return self.options.macos_min
        return MACOS_MIN_METAL if self.backend == "metal" else MACOS_MIN_CPU

    @property
    def python_abi(self) -> Version:
        return Version.parse(self.options.python_abi)

    def settings(self) -> dict[str, Any]:
        settings = self.options.settings()
        settings["torch-stable-abi"] = str(self.stable_abi) if self.stable_abi else None
        settings["macos"] = str(self.macos_min) if self.os_name == "darwin" else None
        return settings


def load_context(variant_dir: Path, options: CheckOptions) -> VariantContext:
    name, name_error = _parse_name(variant_dir.name)
    metadata = read_metadata(variant_dir)
    return VariantContext(
        variant_dir=variant_dir,
        options=recorded_options(options, metadata.model),
        listing=list_variant(variant_dir),
        name=name,
        name_error=name_error,
        metadata_read=metadata,
    )


def recorded_options(options: CheckOptions, metadata: Metadata | None) -> CheckOptions:
    """`options` with the policy and redistributable the build recorded, when asked to
    follow the record and metadata.json has one (kernelnix builds write it)."""
    if not options.follow_record:
        return options
    own = metadata.own if metadata else None
    if own is None or own.policy is None:
        return replace(options, policy_reason="the default policy: metadata.json records none")
    reason = (
        f"the one the {own.toolchain}-toolchain build passed "
        "(metadata.json, provenance.kernelnix.policy)"
    )
    if not own.redistributable and own.policy != DEFAULT_POLICY:
        reason += (
            "; a build for its own machine (--host-glibc, or hostGlibc = true in flake.nix), "
            f"which `upload` refuses: it holds every variant to policy {DEFAULT_POLICY}, "
            "redistributable; rebuild without --host-glibc to publish"
        )
    return replace(
        options, policy=own.policy, redistributable=own.redistributable, policy_reason=reason
    )


def _parse_name(dir_name: str) -> tuple[VariantName | None, str | None]:
    try:
        return parse_variant_name(dir_name), None
    except ValueError as exc:
        return None, str(exc)


def list_variant(root: Path) -> VariantFiles:
    """Walk the variant without following symlinks; sorted for stable output."""
    listing = VariantFiles()
    for current, dirnames, filenames in os.walk(root, followlinks=False):
        base = Path(current).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        for dirname in list(dirnames):
            if (Path(current) / dirname).is_symlink():
                listing.symlinks.append(prefix + dirname)
                dirnames.remove(dirname)
            else:
                listing.dirs.append(prefix + dirname)
        for filename in filenames:
            mode = os.lstat(Path(current) / filename).st_mode
            if stat.S_ISLNK(mode):
                listing.symlinks.append(prefix + filename)
            elif stat.S_ISREG(mode):
                listing.files.append(prefix + filename)
            else:
                listing.special.append(prefix + filename)
    for entries in (listing.files, listing.dirs, listing.symlinks, listing.special):
        entries.sort()
    return listing
