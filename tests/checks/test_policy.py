"""Policies: auditwheel's policy format, one validated loader, and the verdicts.

kernelnix's own `kernel` policy and auditwheel's manylinux levels are read by
the same loader; a malformed policy file is bad input (exit 2) naming the
file, the key path and what was expected.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
from paths import ROOT

from kernelnix.checks.policy import PolicyError, load_policy, policy_names
from kernelnix.checks.policy_file import parse_policy_file, read_policy_files
from kernelnix.core.diagnostics import UserError

KERNEL_POLICY = ROOT / "kernelnix" / "data" / "policies" / "kernel.json"
# Allowed by manylinux_2_27, not by the kernel policy (see the policies README).
NOT_FOR_KERNELS = {
    "libstdc++.so.6",
    "libX11.so.6",
    "libXext.so.6",
    "libXrender.so.1",
    "libICE.so.6",
    "libSM.so.6",
    "libGL.so.1",
    "libgobject-2.0.so.0",
    "libgthread-2.0.so.0",
    "libglib-2.0.so.0",
    "libexpat.so.1",
}


def _auditwheel_level(name: str) -> dict[str, Any]:
    text = resources.files("auditwheel").joinpath("policy", "manylinux-policy.json").read_text()
    return next(entry for entry in json.loads(text) if entry["name"] == name)


# ---------------------------------------------------------------------------
# The kernel policy is auditwheel's manylinux_2_27 data


def test_kernel_policy_lists_are_manylinux_2_27s() -> None:
    (kernel,) = json.loads(KERNEL_POLICY.read_text())
    level = _auditwheel_level("manylinux_2_27")
    assert set(kernel["symbol_versions"]) == {"x86_64", "aarch64"}
    for arch, namespaces in kernel["symbol_versions"].items():
        assert namespaces == level["symbol_versions"][arch], arch
    assert kernel["lib_whitelist"] == [
        library for library in level["lib_whitelist"] if library not in NOT_FOR_KERNELS
    ]
    assert kernel["blacklist"] == level["blacklist"]
    assert set(kernel["kernelnix_forbidden_libraries"]) == {"libstdc++.so.6"}


@pytest.mark.parametrize("arch", ["x86_64", "aarch64"])
def test_kernel_policy_verdicts(arch: str) -> None:
    policy = load_policy("kernel", arch)
    for allowed, rejected in [
        ("GLIBC_2.27", "GLIBC_2.28"),
        ("GLIBCXX_3.4.24", "GLIBCXX_3.4.25"),
        ("CXXABI_1.3.11", "CXXABI_1.3.12"),
        ("GCC_7.0.0", "GCC_8.0.0"),
        ("CXXABI_TM_1", "GLIBC_PRIVATE"),
    ]:
        assert policy.judge(allowed).allowed, allowed
        assert not policy.judge(rejected).allowed, rejected
    assert policy.limit_text("GLIBC") == "GLIBC <= 2.27"
    assert "libstdc++.so.6" in policy.forbidden_libraries
    assert "libstdc++.so.6" not in policy.allowed_libraries
    assert {"libc.so.6", "libm.so.6", "libz.so.1"} <= policy.allowed_libraries
    assert "_tr_flush_block" in policy.forbidden_symbols["libz.so.1"]
    # The long-double ABI tag exists only where libstdc++ has it (x86_64).
    assert policy.judge("CXXABI_FLOAT128").allowed is (arch == "x86_64")


def test_kernel_policy_covers_only_the_hubs_cpus() -> None:
    with pytest.raises(PolicyError, match=r"kernel has no data for ppc64le \(it covers aarch64"):
        load_policy("kernel", "ppc64le")


# ---------------------------------------------------------------------------
# Names, aliases, the manylinux levels


def test_policy_names_include_kernel_and_manylinux_levels() -> None:
    names = policy_names()
    assert names[0] == "kernel"
    assert {"manylinux_2_17", "manylinux_2_28", "manylinux_2_34"} <= set(names)
    assert "linux" not in names  # auditwheel's non-manylinux entry


def test_manylinux_aliases_and_arch_coverage() -> None:
    assert load_policy("manylinux2014", "x86_64").name == "manylinux_2_17"
    with pytest.raises(PolicyError, match="no data for aarch64"):
        load_policy("manylinux_2_5", "aarch64")
    with pytest.raises(PolicyError, match="valid policies: kernel, manylinux_2_5"):
        load_policy("manylinux_9_99", "x86_64")


def test_policy_verdicts_for_named_and_ungoverned_versions() -> None:
    policy = load_policy("manylinux_2_28", "x86_64")
    assert policy.judge("CXXABI_TM_1").allowed  # listed by the policy
    private = policy.judge("GLIBC_PRIVATE")
    assert not private.allowed and not private.numeric
    assert not policy.judge("GLIBC_ABI_DT_RELR").allowed  # only 2_36+ list it
    assert load_policy("manylinux_2_36", "x86_64").judge("GLIBC_ABI_DT_RELR").allowed
    assert policy.judge("libcudart.so.13") is None
    assert policy.judge("LIBFOO_1.0") is None
    assert policy.judge("GLIBC_2.28").allowed and not policy.judge("GLIBC_2.29").allowed


def test_rejected_versions_are_those_the_verdicts_reject() -> None:
    policy = load_policy("manylinux_2_28", "x86_64")
    versions = {"GLIBC_2.17", "GLIBC_2.29", "GLIBC_PRIVATE", "CXXABI_TM_1", "libcudart.so.13"}
    rejected = policy.rejected(versions)
    assert set(rejected) == {"GLIBC_2.29", "GLIBC_PRIVATE"}
    assert rejected == {v: policy.judge(v) for v in rejected}
    assert policy.rejected(versions) == rejected  # again, from the memo of accepted versions


# ---------------------------------------------------------------------------
# Malformed policy files


def _kernel_entry() -> dict[str, Any]:
    (entry,) = json.loads(KERNEL_POLICY.read_text())
    return entry


def _problems(text: str) -> list[tuple[str | None, str]]:
    with pytest.raises(UserError) as error:
        parse_policy_file(text, "bad.json")
    assert {d.file for d in error.value.diagnostics} == {"bad.json"}
    return [(d.key, d.message) for d in error.value.diagnostics]


def test_every_shipped_policy_file_validates() -> None:
    entries = parse_policy_file(KERNEL_POLICY.read_text(), str(KERNEL_POLICY))
    assert [entry.name for entry in entries] == ["kernel"]


@pytest.mark.parametrize(
    ("change", "key", "message"),
    [
        (
            lambda e: e["symbol_versions"]["x86_64"]["GLIBC"].append(2.28),
            "[0].symbol_versions.x86_64.GLIBC[27]",
            "expected a string, got float 2.28",
        ),
        (
            lambda e: e["symbol_versions"]["aarch64"]["GLIBC"].append("2..28"),
            "[0].symbol_versions.aarch64.GLIBC[9]",
            "expected a symbol version: a number such as 2.27 or a name such as TM_1, "
            'found "2..28"',
        ),
        (
            lambda e: e.update(max_symbol_versions={"GLIBC": "2.27"}),
            "[0].max_symbol_versions",
            "unknown key 'max_symbol_versions'; expected auditwheel's keys (name, aliases, "
            "priority, symbol_versions, lib_whitelist, blacklist) or kernelnix's extras "
            "(kernelnix_description, kernelnix_forbidden_libraries)",
        ),
        (
            lambda e: e.pop("lib_whitelist"),
            "[0].lib_whitelist",
            "missing key (auditwheel's policy format requires it)",
        ),
        (
            lambda e: e["aliases"].append(""),
            "[0].aliases[0]",
            "expected a non-empty string",
        ),
        (
            lambda e: e.update(priority="65"),
            "[0].priority",
            "expected an integer, got string '65'",
        ),
        (
            lambda e: e.update(kernelnix_forbidden_libraries=["libstdc++.so.6"]),
            "[0].kernelnix_forbidden_libraries",
            "expected a table, got array ['libstdc++.so.6']",
        ),
    ],
)
def test_malformed_policy_names_the_key_path(change, key: str, message: str) -> None:
    entry = _kernel_entry()
    change(entry)
    assert _problems(json.dumps([entry])) == [(key, message)]


def test_every_problem_of_a_file_is_reported() -> None:
    entry = _kernel_entry()
    entry["aliases"] = "kern"
    entry["blacklist"]["libz.so.1"] = "_tr_init"
    assert [key for key, _ in _problems(json.dumps([entry]))] == [
        "[0].aliases",
        '[0].blacklist."libz.so.1"',
    ]


def test_policy_file_that_is_not_a_list_or_not_json() -> None:
    assert _problems('{"name": "kernel"}') == [
        (None, 'expected a JSON list of policies (auditwheel\'s format), found {"name": "kernel"}')
    ]
    ((key, message),) = _problems("[{")
    assert key is None and message.startswith("not valid JSON: ") and "line 1" in message


def test_a_name_used_twice_across_files(tmp_path: Path) -> None:
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(KERNEL_POLICY.read_text())
    renamed = _kernel_entry() | {"name": "strict", "aliases": ["kernel"]}
    second.write_text(json.dumps([renamed]))
    with pytest.raises(UserError) as error:
        read_policy_files([first, second])
    (diagnostic,) = error.value.diagnostics
    assert (diagnostic.file, diagnostic.key) == (str(second), "[0]")
    assert diagnostic.message == "policy name 'kernel' is used twice"


def test_check_command_refuses_a_malformed_policy_file(tmp_path: Path) -> None:
    """A copy of kernelnix whose kernel.json is broken: exit 2, no traceback, no report."""
    package = tmp_path / "kernelnix"
    shutil.copytree(ROOT / "kernelnix", package, ignore=shutil.ignore_patterns("__pycache__"))
    entry = _kernel_entry()
    entry["symbol_versions"]["x86_64"]["GLIBC"] = "2.27"
    (package / "data" / "policies" / "kernel.json").write_text(json.dumps([entry]))
    variant = tmp_path / "build" / "torch-cpu"
    variant.mkdir(parents=True)
    done = subprocess.run(
        [sys.executable, "-m", "kernelnix", "check", str(variant), "--no-import"],
        capture_output=True,
        text=True,
        check=False,
        cwd=tmp_path,  # `python -m` puts the working directory first on sys.path
        env={**os.environ, "PYTHONPATH": str(tmp_path), "HF_HUB_OFFLINE": "1"},
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert done.stdout == ""
    policy_file = package / "data" / "policies" / "kernel.json"
    assert (
        f"error: {policy_file}: [0].symbol_versions.x86_64.GLIBC: "
        "expected an array, got string '2.27'"
    ) in done.stderr
