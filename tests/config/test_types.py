"""The value types of build.toml, checked one validator at a time."""

from __future__ import annotations

import datetime

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kernelnix.config.types import (
    BACKENDS,
    DEPENDENCIES,
    GIT_SCHEMES,
    KERNEL_BACKENDS,
    EntryError,
    check_cuda_capability,
    check_git_url,
    check_kernel_name,
    check_rocm_arch,
    hub_repo_id_problem,
    parse_capability,
    parse_major_minor,
    parse_stable_abi,
    parse_version,
    toml_type_name,
)
from kernelnix.core.version import Version


def test_the_closed_lists_match_the_reference() -> None:
    assert BACKENDS == ("cann", "cpu", "cuda", "metal", "neuron", "rocm", "tpu", "xpu")
    assert KERNEL_BACKENDS == ("cpu", "cuda", "metal", "rocm", "xpu")
    assert set(DEPENDENCIES) == {
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
    }
    assert GIT_SCHEMES == ("https", "http", "git", "ssh", "git+ssh", "git+https", "git+http")


@pytest.mark.parametrize(
    ("value", "word"),
    [
        (True, "boolean"),
        (1, "integer"),
        (1.5, "float"),
        ("x", "string"),
        ([], "array"),
        ({}, "table"),
        (datetime.date(2026, 1, 1), "date/time"),
        (None, "null"),  # JSON (metadata.json) has null; TOML does not
    ],
)
def test_toml_type_name(value: object, word: str) -> None:
    assert toml_type_name(value) == word


# ------------------------------------------------------------------ names


@pytest.mark.parametrize("name", ["relu", "r2", "flash-attention", "a-b-c", "relu2d", "x9"])
def test_valid_kernel_names(name: str) -> None:
    assert check_kernel_name(name) == name


@pytest.mark.parametrize(
    "name", ["r", "", "Relu", "relu-", "-relu", "1relu", "re_lu", "relu kernel", "relü"]
)
def test_invalid_kernel_names_explain_the_rules(name: str) -> None:
    with pytest.raises(ValueError, match="invalid kernel name") as info:
        check_kernel_name(name)
    assert "at least 2 characters" in str(info.value)


def test_kernel_name_must_be_a_string() -> None:
    with pytest.raises(ValueError, match="expected a kernel name as a string, got integer 5"):
        check_kernel_name(5)


# --------------------------------------------------------------- versions


@pytest.mark.parametrize(
    ("text", "parts"),
    [
        ("12.6", (12, 6)),
        (" 12.6 ", (12, 6)),
        ("12.0", (12,)),
        ("12.08", (12, 8)),
        ("2.11", (2, 11)),
    ],
)
def test_major_minor_versions(text: str, parts: tuple[int, ...]) -> None:
    assert parse_major_minor(text) == Version(parts)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("12", "expected major.minor"),
        ("12.8.1", "expected major.minor"),
        ("12.x", "dot-separated numbers"),
        ("12.", "dot-separated numbers"),
        ("", "empty version string"),
        ("v12.6", "dot-separated numbers"),
        ("12. 6", "dot-separated numbers"),
    ],
)
def test_invalid_versions(text: str, fragment: str) -> None:
    with pytest.raises(ValueError, match=fragment):
        parse_major_minor(text)


def test_a_float_version_is_rejected_with_the_reason() -> None:
    with pytest.raises(ValueError, match=r"quoted string, got the number 12\.1") as info:
        parse_version(12.10)
    assert "12.10 reads as 12.1" in str(info.value)


def test_a_version_needs_a_string() -> None:
    with pytest.raises(ValueError, match="expected a version as a string, got integer 12"):
        parse_major_minor(12)


# ------------------------------------------------------------- stable-abi


def test_stable_abi_string_means_every_backend() -> None:
    assert parse_stable_abi("2.11") == Version((2, 11))


def test_stable_abi_table_is_per_backend() -> None:
    assert parse_stable_abi({"cuda": "2.11", "cpu": "2.12"}) == {
        "cuda": Version((2, 11)),
        "cpu": Version((2, 12)),
    }


def test_stable_abi_table_entry_errors_name_the_entry() -> None:
    with pytest.raises(EntryError) as info:
        parse_stable_abi({"cuda": "2.11", "gpu": "2.11"})
    assert info.value.key == "gpu"
    assert "unknown backend 'gpu'" in str(info.value)
    with pytest.raises(EntryError) as info:
        parse_stable_abi({"cuda": 2.10})
    assert (info.value.key, info.value.value) == ("cuda", 2.10)


@pytest.mark.parametrize("value", [2, True, ["2.11"]])
def test_stable_abi_of_another_type(value: object) -> None:
    with pytest.raises(ValueError, match="or a table of backend = version"):
        parse_stable_abi(value)


@pytest.mark.parametrize("value", ["2", "2.11.0", "2.x"])
def test_stable_abi_must_be_major_minor(value: str) -> None:
    with pytest.raises(ValueError, match="invalid version"):
        parse_stable_abi(value)


# ---------------------------------------------------------------- git URLs


@pytest.mark.parametrize(
    "url",
    [
        "https://github.com/org/repo",
        "https://github.com/org/repo.git",
        "HTTPS://github.com/org/repo",
        "http://example.com/repo.git",
        "git://example.com/repo.git",
        "ssh://git@github.com/org/repo.git",
        "ssh://git@github.com:22/org/repo.git",
        "git+ssh://git@github.com/org/repo",
        "git+https://github.com/org/repo",
        "git+http://example.com/repo",
        "https://user:token@github.com/org/repo",
        "https://github.com/",
        # scp form: user@host:path
        "git@github.com:org/repo.git",
        "git@github.com:org/repo",
        "@host:org/repo",
        "a@b@host:path",
        "user@host:org/re po",
    ],
)
def test_accepted_git_urls(url: str) -> None:
    assert check_git_url(url) == url


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://github.com/org/repo", "unsupported scheme 'ftp'"),
        ("file:///tmp/repo", "unsupported scheme 'file'"),
        ("git+file:///tmp/repo", "unsupported scheme 'git+file'"),
        ("svn://example.com/repo", "unsupported scheme 'svn'"),
        ("github.com/org/repo", "invalid git URL"),
        ("host:org/repo", "invalid git URL"),
        ("git@github.com:/org/repo.git", "invalid git URL"),
        ("git@github.com:", "invalid git URL"),
        ("git@:org/repo", "invalid git URL"),
        ("user@ho st:org", "invalid git URL"),
        ("https://", "it needs a host"),
        ("https://[::1/x", "Invalid IPv6 URL"),
        ("", "invalid git URL"),
    ],
)
def test_rejected_git_urls(url: str, fragment: str) -> None:
    with pytest.raises(ValueError, match="git URL") as info:
        check_git_url(url)
    assert fragment in str(info.value)


def test_unsupported_scheme_lists_the_supported_ones() -> None:
    with pytest.raises(ValueError) as info:
        check_git_url("ftp://example.com/x")
    assert ", ".join(GIT_SCHEMES) in str(info.value)


# -------------------------------------------------------- archs and flags


@pytest.mark.parametrize(
    ("text", "version", "suffix", "ptx"),
    [
        ("8.0", (8,), "", False),
        ("7.5", (7, 5), "", False),
        ("9.0a", (9,), "a", False),
        ("10.0f", (10,), "f", False),
        ("9.0+PTX", (9,), "", True),
        ("12.0a+PTX", (12,), "a", True),
        ("10.1f+PTX", (10, 1), "f", True),
    ],
)
def test_cuda_capability_forms(text: str, version: tuple[int, ...], suffix: str, ptx: bool) -> None:
    assert check_cuda_capability(text) == text
    assert parse_capability(text) == (Version(version), suffix, ptx)


@pytest.mark.parametrize(
    "text", ["sm_80", "9", "9.0b", "9.0+ptx", "9.0 +PTX", "9.0af", "8.0 ", "", "compute_90", "a.b"]
)
def test_invalid_cuda_capabilities(text: str) -> None:
    with pytest.raises(ValueError, match="invalid CUDA capability") as info:
        check_cuda_capability(text)
    assert '"9.0a", "10.0f", "9.0+PTX"' in str(info.value)
    with pytest.raises(ValueError):
        parse_capability(text)


def test_a_float_capability_is_rejected() -> None:
    with pytest.raises(ValueError, match="CUDA capability as a quoted string"):
        check_cuda_capability(9.0)


@pytest.mark.parametrize(
    "arch",
    [
        "gfx906",
        "gfx908",
        "gfx90a",
        "gfx942",
        "gfx950",
        "gfx1030",
        "gfx1100",
        "gfx1201",
        "gfx90a:xnack+",
        "gfx942:sramecc+:xnack-",
    ],
)
def test_valid_rocm_archs(arch: str) -> None:
    assert check_rocm_arch(arch) == arch


@pytest.mark.parametrize(
    "arch", ["mi300", "GFX90A", "gfx9", "gfx90a:xnack", "gfx90a ", "", "sm_90"]
)
def test_invalid_rocm_archs(arch: str) -> None:
    with pytest.raises(ValueError, match="invalid ROCm arch"):
        check_rocm_arch(arch)


# Characters around the Hub's rules: word characters (a non-ASCII letter too), the
# separators, and characters it refuses.
_REPO_ID_CHARS = "ab9_-./éZ +"


def _hub_accepts(repo_id: str) -> bool:
    from huggingface_hub.errors import HFValidationError
    from huggingface_hub.utils import validate_repo_id

    try:
        validate_repo_id(repo_id)
    except HFValidationError:
        return False
    return True


@settings(max_examples=400, deadline=None)
@given(
    st.one_of(
        st.text(alphabet=_REPO_ID_CHARS, max_size=12),
        st.builds("{}/{}".format, st.text("ab-._", max_size=98), st.text("ab-._", max_size=98)),
        st.sampled_from(["a" * 96, "a" * 97, "o/x.git", "o/x.gits", "a--b/c", "a/b..c", "é/x"]),
    )
)
def test_repo_ids_are_judged_as_the_hub_library_judges_them(repo_id: str) -> None:
    assert (hub_repo_id_problem(repo_id) is None) == _hub_accepts(repo_id)
