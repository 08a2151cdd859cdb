"""Finding a kernel's header dependencies (CUTLASS) on the build's machine: the
environment variable, else the pip package of the build's Python; the version read
from the headers must be the one the dependency names."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import EXAMPLES

from kernelnix.cli import main
from kernelnix.compile.dependencies import (
    dependency_definitions,
    dependency_locations,
    environment_variable,
    needed_dependencies,
    resolve_dependency,
)
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.dependencies import header_dependencies


def cutlass_headers(root: Path, major: int, minor: int, patch: int) -> Path:
    """An include directory with CUTLASS's version header, as CUTLASS writes it."""
    (root / "cutlass").mkdir(parents=True)
    (root / "cutlass" / "version.h").write_text(
        "#pragma once\n"
        f"#define CUTLASS_MAJOR {major}\n#define CUTLASS_MINOR {minor}\n"
        f"#define CUTLASS_PATCH {patch}\n"
    )
    return root


def test_every_cutlass_name_has_its_pinned_release() -> None:
    known = header_dependencies()
    for key, dependency in known.items():
        major, minor = key.removeprefix("cutlass_").split("_")
        assert dependency.version.major_minor() == f"{major}.{minor}"
    assert set(known) == {
        "cutlass_2_10", "cutlass_3_5", "cutlass_3_6", "cutlass_3_8",
        "cutlass_3_9", "cutlass_4_0", "cutlass_4_4", "cutlass_4_5",
    }  # fmt: skip
    assert environment_variable("cutlass_3_8") == "KERNELNIX_DEP_CUTLASS_3_8"


def test_the_variable_names_the_include_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    include = cutlass_headers(tmp_path / "include", 3, 8, 1)
    monkeypatch.setenv("KERNELNIX_DEP_CUTLASS_3_8", str(include))
    resolved = resolve_dependency("cutlass_3_8")
    assert resolved.include == include and str(resolved.version) == "3.8.1"
    assert resolved.source == "KERNELNIX_DEP_CUTLASS_3_8"


def test_cutlass_util_headers_come_with_a_source_tree_or_the_wheel(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """CUTLASS's cutlass/util/ headers (packed_stride.hpp, ...) are in tools/util/include
    of its source tree and of the nvidia-cutlass wheel, beside include/; an installed
    CUTLASS, as kernel-builder's, has them under include/. kernels-community's
    nvfp4-gemm includes cutlass/util/packed_stride.hpp."""
    include = cutlass_headers(tmp_path / "cutlass" / "include", 4, 0, 0)
    monkeypatch.setenv("KERNELNIX_DEP_CUTLASS_4_0", str(include))
    assert resolve_dependency("cutlass_4_0").includes == [include]
    util = tmp_path / "cutlass" / "tools" / "util" / "include"
    (util / "cutlass" / "util").mkdir(parents=True)
    resolved = resolve_dependency("cutlass_4_0")
    assert resolved.includes == [include, util]
    plan = build_plan(load_config(EXAMPLES / "cute-scale"), PlanOptions(unique_id="deps1"))
    variant = plan.variants["x86_64-linux"]["torch214-cxx11-cu130-x86_64-linux"]
    include_3_8 = cutlass_headers(tmp_path / "c38" / "include", 3, 8, 0)
    (tmp_path / "c38" / "tools" / "util" / "include").mkdir(parents=True)
    monkeypatch.setenv("KERNELNIX_DEP_CUTLASS_3_8", str(include_3_8))
    assert dependency_definitions(plan, variant) == [
        f"-DKERNELNIX_DEP_cutlass_3_8={include_3_8};{tmp_path / 'c38/tools/util/include'}"
    ]


def test_another_minor_version_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    include = cutlass_headers(tmp_path / "include", 3, 9, 2)
    monkeypatch.setenv("KERNELNIX_DEP_CUTLASS_3_8", str(include))
    with pytest.raises(UserError) as raised:
        resolve_dependency("cutlass_3_8")
    (problem,) = raised.value.diagnostics
    assert "wants CUTLASS 3.8, but" in problem.message and "holds CUTLASS 3.9.2" in problem.message
    assert problem.key == "KERNELNIX_DEP_CUTLASS_3_8"
    assert "nvidia-cutlass==3.8.*" in (problem.fix or "")


def test_a_directory_without_the_headers_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELNIX_DEP_CUTLASS_4_0", str(tmp_path))
    with pytest.raises(UserError) as raised:
        resolve_dependency("cutlass_4_0")
    assert "has no cutlass/version.h" in raised.value.diagnostics[0].message


@pytest.mark.skipif(
    importlib.util.find_spec("cutlass_library") is not None, reason="nvidia-cutlass is installed"
)
def test_a_missing_dependency_names_the_ways_to_provide_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("KERNELNIX_DEP_CUTLASS_3_8", raising=False)
    with pytest.raises(UserError) as raised:
        resolve_dependency("cutlass_3_8")
    (problem,) = raised.value.diagnostics
    assert "CUTLASS 3.8 (`cutlass_3_8`) was not found" in problem.message
    assert "KERNELNIX_DEP_CUTLASS_3_8 is not set" in problem.message
    assert "pip install 'nvidia-cutlass==3.8.*'" in (problem.fix or "")


def test_a_release_pypi_has_no_wheel_of_is_provided_from_its_source_release(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """CUTLASS 4.0: the lock has no nvidia-cutlass wheel of it, so the fix is a clone of
    the release dependencies.json pins, not a pip install that cannot succeed."""
    monkeypatch.delenv("KERNELNIX_DEP_CUTLASS_4_0", raising=False)
    with pytest.raises(UserError) as raised:
        resolve_dependency("cutlass_4_0")
    (problem,) = raised.value.diagnostics
    assert problem.fix == (
        "clone its release: `git clone --depth 1 --branch v4.0.0 "
        "https://github.com/NVIDIA/cutlass`, and set KERNELNIX_DEP_CUTLASS_4_0=<the clone>/include "
        "(a Nix build fetches the release itself)"
    )


def test_the_cute_example_needs_cutlass_3_8_in_its_cuda_variants() -> None:
    plan = build_plan(load_config(EXAMPLES / "cute-scale"), PlanOptions(unique_id="deps1"))
    variant = plan.variants["x86_64-linux"]["torch214-cxx11-cu130-x86_64-linux"]
    assert needed_dependencies(plan, variant) == ["cutlass_3_8"]


def test_the_option_stands_for_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    include = cutlass_headers(tmp_path / "include", 4, 5, 2)
    found = dependency_locations((f"cutlass_4_5={include}",))
    assert found == {"KERNELNIX_DEP_CUTLASS_4_5": str(include)}
    for name, value in found.items():
        monkeypatch.setenv(name, value)
    assert resolve_dependency("cutlass_4_5").include == include


@pytest.mark.parametrize("value", ["cutlass_3_8", "cutlass_9_9=/x", "=/x", "cutlass_3_8="])
def test_bad_options_are_errors(value: str) -> None:
    with pytest.raises(UserError) as raised:
        dependency_locations((value,))
    assert raised.value.diagnostics[0].key == "--dependency"


def test_nix_builds_take_no_dependency_option() -> None:
    result = CliRunner().invoke(
        main, ["build", str(EXAMPLES / "cute-scale"), "--dependency", "cutlass_3_8=/x"]
    )
    assert result.exit_code == 2
    assert "--dependency applies to --local builds" in result.output
