"""Value types of build.toml: names, versions, git URLs, capabilities, dependencies.

Each validator raises `ValueError` with a sentence that names the bad value and
says what was expected; the loader adds the file, key path and line. Each type
also carries its JSON Schema (`WithJsonSchema`): a title, the words the docs
use for it, and the same regular expression as its validator, so an editor
rejects what the loader rejects.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, get_args
from urllib.parse import urlsplit

from pydantic import Field, PlainSerializer, PlainValidator, WithJsonSchema

from kernelnix.core.version import Version

BackendName = Literal["cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu"]
BACKENDS: tuple[str, ...] = get_args(BackendName)

KernelBackend = Literal["cpu", "cuda", "metal", "rocm", "xpu"]
KERNEL_BACKENDS: tuple[str, ...] = get_args(KernelBackend)

DependencyName = Literal[
    "cutlass_2_10",
    "cutlass_3_5",
    "cutlass_3_6",
    "cutlass_3_8",
    "cutlass_3_9",
    "cutlass_4_0",
    "cutlass_4_4",
    "cutlass_4_5",
    "sycl_tla",
    "metal-cpp",
    "torch",
]
DEPENDENCIES: tuple[str, ...] = get_args(DependencyName)

GIT_SCHEMES = ("https", "http", "git", "ssh", "git+ssh", "git+https", "git+http")

_KERNEL_NAME = re.compile(r"[a-z][-a-z0-9]*[a-z0-9]")
_CAPABILITY = re.compile(r"(?P<major>[0-9]+)\.(?P<minor>[0-9]+)(?P<suffix>[af]?)(?P<ptx>\+PTX)?")
_ROCM_ARCH = re.compile(r"gfx[0-9a-f]{3,4}(:(sramecc|xnack)[+-])*")
# As upstream: the user may be empty or hold spaces, the host may not, the path is anything.
_SCP_URL = re.compile(r"(?P<user>[^@/]*)@(?P<host>[^:/\s]+):(?P<path>.+)")


# What Version.parse accepts, written as a JSON Schema pattern (the schema has no code).
_MAJOR_MINOR = r"\s*[0-9]+\.[0-9]+\s*"


# Python types of parsed TOML (and JSON) -> their TOML words; bool before int.
_TOML_TYPES = (
    (bool, "boolean"),
    (int, "integer"),
    (float, "float"),
    (str, "string"),
    (list, "array"),
    (dict, "table"),
)


def toml_type_name(value: object) -> str:
    """The TOML word for a parsed value's type, for error messages (JSON's null too)."""
    if value is None:
        return "null"
    return next((word for kind, word in _TOML_TYPES if isinstance(value, kind)), "date/time")


class EntryError(ValueError):
    """A problem with one entry of a table value; `key` extends the error's key path."""

    def __init__(self, key: str, value: object, message: str) -> None:
        super().__init__(message)
        self.key = key
        self.value = value


def _require_string(value: object, what: str) -> str:
    if isinstance(value, float):
        raise ValueError(
            f"expected {what} as a quoted string, got the number {value!r} "
            "(TOML numbers lose trailing zeros: 12.10 reads as 12.1)"
        )
    if not isinstance(value, str):
        raise ValueError(f"expected {what} as a string, got {toml_type_name(value)} {value!r}")
    return value


def parse_version(value: object) -> Version:
    if isinstance(value, Version):
        return value
    text = _require_string(value, "a version")
    try:
        return Version.parse(text)
    except ValueError as exc:
        raise ValueError(f'invalid version {text!r}: {exc}; expected e.g. "12.6"') from None


def parse_major_minor(value: object) -> Version:
    """A build.toml version: exactly `major.minor` ("12.6", "2.11"), as upstream requires."""
    version = parse_version(value)
    if isinstance(value, str) and len(value.strip().split(".")) != 2:
        # The kernels loader refuses these too ("Version has 1 components, expected 2").
        raise ValueError(
            f"invalid version {value.strip()!r}: expected major.minor, as the kernels "
            f'loader requires; write "{version.major_minor()}"'
        )
    return version


def check_kernel_name(value: object) -> str:
    text = _require_string(value, "a kernel name")
    if not _KERNEL_NAME.fullmatch(text):
        raise ValueError(
            f"invalid kernel name {text!r}: a name starts with a lowercase letter, "
            "contains only lowercase letters, digits and '-', does not end with '-', "
            "and is at least 2 characters long"
        )
    return text


# A part of a Hub repository id: ASCII letters, digits, `_`, `-` and `.`, starting and
# ending with a letter, digit or `_`, at most 96 long.
_HUB_NAME = re.compile(r"(?=\w)[\w.-]{1,96}(?<=\w)", re.ASCII)


def hub_repo_id_problem(repo_id: str) -> str | None:
    """Why the Hub refuses `repo_id` (`name` or `owner/name`), or None. The rules of
    huggingface_hub's `validate_repo_id`, checked without importing it (slow)."""
    parts = repo_id.split("/")
    if len(parts) > 2:
        return "it has more than one '/'; write it as <owner>/<name>"
    if not all(_HUB_NAME.fullmatch(part) for part in parts):
        return (
            "each part uses letters, digits, '-', '_' and '.', starts and ends with a "
            "letter or digit (or '_') and is at most 96 characters long"
        )
    if "--" in repo_id or ".." in repo_id:
        return "it contains '--' or '..'"
    if repo_id.endswith(".git"):
        return "it ends with '.git'"
    return None


def check_git_url(value: object) -> str:
    text = _require_string(value, "a git URL")
    scp = _SCP_URL.fullmatch(text)
    if scp and "://" not in text and not scp.group("path").startswith("/"):
        return text
    try:
        parts = urlsplit(text)
    except ValueError as exc:  # e.g. "Invalid IPv6 URL"
        raise ValueError(f"invalid git URL {text!r}: {exc}") from None
    if not parts.scheme or "://" not in text:
        raise ValueError(
            f"invalid git URL {text!r}: expected scheme://host/path (e.g. "
            "https://github.com/org/repo) or user@host:path"
        )
    if parts.scheme not in GIT_SCHEMES:
        raise ValueError(
            f"unsupported scheme {parts.scheme!r} in git URL {text!r}; "
            f"expected one of: {', '.join(GIT_SCHEMES)}"
        )
    if not parts.hostname:
        # Upstream accepts a URL without a path (`https://github.com/`); so do we.
        raise ValueError(f"invalid git URL {text!r}: it needs a host")
    return text


def check_cuda_capability(value: object) -> str:
    text = _require_string(value, "a CUDA capability")
    if not _CAPABILITY.fullmatch(text):
        raise ValueError(
            f"invalid CUDA capability {text!r}; expected major.minor with an optional "
            '\'a\' or \'f\' suffix and optional \'+PTX\', e.g. "8.0", "9.0a", "10.0f", "9.0+PTX"'
        )
    return text


def check_rocm_arch(value: object) -> str:
    text = _require_string(value, "a ROCm arch")
    if not _ROCM_ARCH.fullmatch(text):
        raise ValueError(
            f'invalid ROCm arch {text!r}; expected a gfx target such as "gfx90a" or "gfx942"'
        )
    return text


def parse_capability(text: str) -> tuple[Version, str, bool]:
    """`9.0a+PTX` -> (Version 9.0, "a", True). Input must already be valid."""
    match = _CAPABILITY.fullmatch(text)
    if match is None:
        raise ValueError(f"invalid CUDA capability {text!r}")
    version = Version((int(match["major"]), int(match["minor"])))
    return version, match["suffix"], bool(match["ptx"])


def _serialize_version(version: Version) -> str:
    """`12.0` stays `12.0`: upstream needs both components, and Version drops the zero."""
    return version.major_minor()


def json_pattern(regex: str) -> str:
    """A Python regular expression as an anchored JSON Schema pattern (no group names)."""
    return "^(?:" + re.sub(r"\(\?P<\w+>", "(", regex) + ")$"


def _any_case(word: str) -> str:
    """`git+ssh` -> `[gG][iI][tT]\\+[sS][sS][hH]`: JSON Schema patterns have no flags."""
    return "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else re.escape(c) for c in word)


# The URL form as check_git_url reads it (urlsplit: userinfo@host:port), and the scp form.
_GIT_URL = (
    f"(?:{'|'.join(_any_case(s) for s in GIT_SCHEMES)})://"
    r"(?:[^/?#]*@)?(?:[^/?#@:\[\]]+|\[[^/?#\]]+\])(?::[^/?#]*)?(?:[/?#].*)?"
    r"|[^@/]*@[^:/\s]+:[^/].*"
)


def _string_type(title: str, pattern: str, description: str, examples: list[str]) -> WithJsonSchema:
    return WithJsonSchema(
        {
            "title": title,
            "description": description,
            "type": "string",
            "pattern": pattern,
            "examples": examples,
        }
    )


def _choice_type(title: str, choices: tuple[str, ...], description: str) -> WithJsonSchema:
    return WithJsonSchema(
        {"title": title, "description": description, "type": "string", "enum": list(choices)}
    )


_VERSION_SCHEMA = _string_type(
    "version",
    json_pattern(_MAJOR_MINOR),
    'A quoted `major.minor` version: exactly two dot-separated numbers (`"12.0"`, not `"12"`). '
    "A TOML number is rejected: `12.10` would read as `12.1`.",
    ["12.6", "2.11"],
)

VersionStr = Annotated[
    Version,
    PlainValidator(parse_major_minor),
    PlainSerializer(_serialize_version, return_type=str),
    _VERSION_SCHEMA,
]
KernelName = Annotated[
    str,
    PlainValidator(check_kernel_name),
    _string_type(
        "kernel name",
        json_pattern(_KERNEL_NAME.pattern),
        "A lowercase letter first, then lowercase letters, digits and `-`, no `-` at the end, "
        "at least 2 characters. The Python module name replaces `-` with `_`.",
        ["relu", "flash-attention"],
    ),
]
GitUrl = Annotated[
    str,
    PlainValidator(check_git_url),
    _string_type(
        "git URL",
        json_pattern(_GIT_URL),
        f"A URL with a host and one of the schemes {', '.join(GIT_SCHEMES)}, or the scp "
        "form `user@host:path` (the path not starting with `/`).",
        ["https://github.com/org/repo", "git@github.com:org/repo.git"],
    ),
]
CudaCapability = Annotated[
    str,
    PlainValidator(check_cuda_capability),
    _string_type(
        "CUDA capability",
        json_pattern(_CAPABILITY.pattern),
        "`major.minor`, an optional `a` or `f` suffix, an optional `+PTX`.",
        ["8.0", "9.0a", "10.0f", "9.0+PTX"],
    ),
]
RocmArch = Annotated[
    str,
    PlainValidator(check_rocm_arch),
    _string_type(
        "ROCm arch",
        json_pattern(_ROCM_ARCH.pattern),
        "A gfx target with optional feature flags.",
        ["gfx90a", "gfx942", "gfx90a:xnack+"],
    ),
]
Backend = Annotated[BackendName, _choice_type("backend", BACKENDS, "A backend name, lowercase.")]
Dependency = Annotated[
    DependencyName,
    _choice_type("dependency", DEPENDENCIES, "A library a kernel is compiled against."),
]
NonNegativeInt = Annotated[int, Field(ge=0)]


def parse_stable_abi(value: Any) -> Version | dict[str, Version]:
    """`"2.11"` (all backends) or `{cuda = "2.11", cpu = "2.12"}` (per backend)."""
    if isinstance(value, dict):
        table: dict[str, Version] = {}
        for backend, version in value.items():
            if backend not in BACKENDS:
                raise EntryError(
                    backend,
                    version,
                    f"unknown backend {backend!r} in the stable-abi table; "
                    f"expected backends among: {', '.join(BACKENDS)}",
                )
            try:
                table[backend] = parse_major_minor(version)
            except ValueError as exc:
                raise EntryError(backend, version, str(exc)) from None
        return table
    if isinstance(value, (str, float, Version)):
        return parse_major_minor(value)
    raise ValueError(
        'expected a Torch version string (e.g. "2.11") or a table of backend = version, '
        f"got {toml_type_name(value)} {value!r}"
    )


def _serialize_stable_abi(value: Version | dict[str, Version]) -> str | dict[str, str]:
    if isinstance(value, Version):
        return _serialize_version(value)
    return {backend: _serialize_version(version) for backend, version in value.items()}


def json_schema_of(value_type: Any) -> dict[str, Any]:
    """The JSON Schema an Annotated value type carries."""
    found = next(m for m in get_args(value_type)[1:] if isinstance(m, WithJsonSchema))
    return found.json_schema or {}


_VERSION_JSON = json_schema_of(VersionStr)

StableAbi = Annotated[
    Version | dict[str, Version],
    PlainValidator(parse_stable_abi),
    PlainSerializer(_serialize_stable_abi),
    WithJsonSchema(
        {
            "title": "version, or a table backend = version",
            "anyOf": [
                _VERSION_JSON,
                {
                    "type": "object",
                    "propertyNames": {"enum": list(BACKENDS)},
                    "additionalProperties": _VERSION_JSON,
                },
            ],
        }
    ),
]

# The value types as docs/build-toml.md lists them.
VALUE_TYPES = [
    json_schema_of(value_type)
    for value_type in (
        KernelName,
        VersionStr,
        GitUrl,
        Backend,
        Dependency,
        CudaCapability,
        RocmArch,
    )
]
