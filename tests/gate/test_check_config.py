"""The gate of `check-config`: it rejects every config that a plan or the generated
CMake project rejects (a property over mutated projects), and it reports each
problem with file, key path and line."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import ROOT
from strategies import Project, valid_projects

from kernelnix.config import load_config
from kernelnix.config.load import LoadedConfig
from kernelnix.core.diagnostics import UserError
from kernelnix.emit.cmake import cmake_project
from kernelnix.gate.check_config import GATE_UNIQUE_ID, config_problems
from kernelnix.plan.build import PlanOptions, build_plan

VERSIONS = ["1.0", "2.12", "2.13", "9.9", "12.6", "13.0", "13.2", "99.0"]
CAPABILITIES = ["5.0", "7.0", "7.5", "8.0", "9.0a", "10.1", "12.1", "12.0+PTX"]
ROCM_ARCHS = ["gfx803", "gfx90a", "gfx942", "gfx1200"]
PYTHON_DEPENDS = ["einops", "numpy", "nki", "nvidia-cutlass-dsl"]


@st.composite
def mutated_projects(draw: st.DrawFn) -> Project:
    """A valid project with some of the changes that later stages may reject."""
    project = draw(valid_projects())
    document: dict[str, Any] = project.document
    files = list(project.files)
    general, torch = document["general"], document["torch"]
    if draw(st.booleans()):
        files.remove(draw(st.sampled_from(files)))
    if draw(st.booleans()):
        general["python-depends"] = draw(st.lists(st.sampled_from(PYTHON_DEPENDS), max_size=2))
    for key in ("minver", "maxver"):
        if draw(st.booleans()):
            torch[key] = draw(st.sampled_from(VERSIONS))
    if "cuda" in general["backends"] and draw(st.booleans()):
        general["cuda"] = {"minver": draw(st.sampled_from(VERSIONS))}
    for kernel in document["kernel"].values():
        if kernel["backend"] == "cuda" and draw(st.booleans()):
            kernel["cuda-capabilities"] = draw(
                st.lists(st.sampled_from(CAPABILITIES), min_size=1, max_size=3, unique=True)
            )
        if kernel["backend"] == "rocm" and draw(st.booleans()):
            kernel["rocm-archs"] = draw(
                st.lists(st.sampled_from(ROCM_ARCHS), min_size=1, max_size=2, unique=True)
            )
    return Project(document, tuple(files))


def rejected_downstream(loaded: LoadedConfig) -> bool:
    """Whether the plan, or the CMake project of any compiled variant, refuses the config."""
    try:
        plan = build_plan(loaded, PlanOptions(unique_id=GATE_UNIQUE_ID))
        for system, variants in plan.variants.items():
            for name, variant in variants.items():
                if variant.kind in ("arch", "stable-abi"):
                    cmake_project(plan, system, name)
    except UserError:
        return True
    return False


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(project=mutated_projects())
def test_check_config_rejects_whatever_the_plan_or_cmake_rejects(project: Project) -> None:
    with tempfile.TemporaryDirectory() as directory:
        root = Path(directory)
        project.write(root)
        try:
            loaded = load_config(root)
        except UserError:
            return  # the file itself is refused: check-config's first stage
        errors = [d for d in config_problems(loaded) if d.severity == "error"]
        if rejected_downstream(loaded):
            assert errors, "the plan or CMake refused a config that check-config accepted"
        assert all(d.file and d.key and d.line for d in errors), errors


def test_the_examples_pass_the_gate() -> None:
    for build_toml in sorted((ROOT / "examples").glob("*/build.toml")):
        loaded = load_config(build_toml.parent)
        assert [d for d in config_problems(loaded) if d.severity == "error"] == []
