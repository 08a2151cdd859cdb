"""A variant built in steps (kernelnix.compile.objects, and configure_variant,
compile_object and build_variant's `prebuilt` in kernelnix.compile.variant), as the
derivations of an object-by-object Nix build run them: multi-kernel's CPU variant
(four C++ sources, one with flags of its own) configured in one folder, each object
compiled in another, linked in a third; real CMake, Ninja and g++.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from handmade import committed_copy, plan_here
from paths import EXAMPLES

from kernelnix.cli import main
from kernelnix.compile import build_variant
from kernelnix.compile.objects import OBJECTS_FILE, configured_objects
from kernelnix.compile.variant import Prebuilt, compile_object, configure_variant
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import Plan

SYSTEM = "x86_64-linux"
CPU = "torch213-cxx11-cpu-x86_64-linux"
UNITS = [
    "activation/silu_avx2.cpp",
    "activation/silu_portable.cpp",
    "scale/scale.cpp",
    "torch-ext/torch_binding.cpp",
]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed"),
]


@pytest.fixture(scope="module")
def kernel(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Plan]:
    copy = committed_copy("multi-kernel", tmp_path_factory.mktemp("objects"))
    return copy, plan_here(copy)


@pytest.fixture(scope="module")
def configured(kernel: tuple[Path, Plan], tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, plan = kernel
    out = tmp_path_factory.mktemp("configured") / "configured"
    work = tmp_path_factory.mktemp("configure-work") / "kernelnix-build"
    return configure_variant(plan, SYSTEM, CPU, out, unique_id="steps", work_dir=work)


def linked(kernel: tuple[Path, Plan], prebuilt: Prebuilt, tmp_path: Path, **options: bool) -> Path:
    """The variant step: `prebuilt`'s objects linked, in a folder of its own."""
    source, plan = kernel
    return build_variant(
        plan,
        SYSTEM,
        CPU,
        source,
        tmp_path / "variant",
        unique_id="steps",
        work_dir=tmp_path / "link" / "kernelnix-build",
        prebuilt=prebuilt,
        **options,
    )


def test_the_configured_tree_lists_every_compiled_source_and_no_header(configured: Path) -> None:
    objects = configured_objects(configured)
    assert sorted(objects) == UNITS
    assert all(o.startswith("CMakeFiles/") and o.endswith(".o") for o in objects.values())
    # The kernel's tree stays behind: each later step puts its own sources there.
    assert not (configured / "project" / "kernel").exists()
    assert json.loads((configured / OBJECTS_FILE).read_text())["root"]


def test_objects_compiled_apart_link_into_a_variant_that_passes_its_checks(
    kernel: tuple[Path, Plan], configured: Path, tmp_path: Path
) -> None:
    source, plan = kernel
    outputs = []
    for index, unit in enumerate(UNITS):
        # Each in a folder of its own, as Nix's steps outside the sandbox are.
        work = tmp_path / f"object-{index}" / "kernelnix-build"
        out = tmp_path / f"out-{index}"
        built = compile_object(plan, SYSTEM, CPU, configured, unit, source, out, work_dir=work)
        assert built == out / configured_objects(configured)[unit] and built.is_file()
        outputs.append(out)
    variant = linked(kernel, Prebuilt(configured, outputs), tmp_path)
    assert (variant / "metadata.json").is_file()
    assert [p.name for p in variant.glob("_multi_kernel_cpu_steps.*so")]


def test_a_missing_object_is_named(
    kernel: tuple[Path, Plan], configured: Path, tmp_path: Path
) -> None:
    source, plan = kernel
    out = tmp_path / "one"
    compile_object(plan, SYSTEM, CPU, configured, UNITS[0], source, out, work_dir=tmp_path / "w")
    with pytest.raises(UserError) as raised:
        linked(kernel, Prebuilt(configured, [out]), tmp_path, import_check=False)
    message = raised.value.render()
    assert "no object was built for activation/silu_portable.cpp, scale/scale.cpp" in message
    assert not (tmp_path / "variant" / CPU).exists()


def test_a_source_the_project_does_not_compile_is_refused(
    kernel: tuple[Path, Plan], configured: Path, tmp_path: Path
) -> None:
    source, plan = kernel
    with pytest.raises(UserError) as raised:
        compile_object(plan, SYSTEM, CPU, configured, "activation/activation.h", source, tmp_path)
    assert "compiles no 'activation/activation.h'" in raised.value.render()
    assert "scale/scale.cpp" in raised.value.render()


def test_the_command_s_steps_refuse_what_they_lack_with_exit_2(
    kernel: tuple[Path, Plan], configured: Path, tmp_path: Path
) -> None:
    source, plan = kernel
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.to_json())
    base = ["build-variant", "--plan", str(plan_file), "--variant", CPU, "--system", SYSTEM]
    out = ["--out", str(tmp_path / "out")]
    cases = [
        (["--step", "object", "--source", str(source)], "--step object needs --configured"),
        (["--step", "variant"], "--step variant needs --source"),
        (["--source", str(source), "--configured", str(configured)], "go together"),
    ]
    for args, message in cases:
        result = CliRunner().invoke(main, [*base, *out, *args])
        assert result.exit_code == 2, result.output
        assert message in result.output
        assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_noarch_variant_is_not_configured_for_objects(tmp_path: Path) -> None:
    source = EXAMPLES / "relu-noarch"
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(build_plan(load_config(source), PlanOptions()).to_json())
    args = ["build-variant", "--plan", str(plan_file), "--variant", "torch-cpu"]
    result = CliRunner().invoke(main, [*args, "--step", "configure", "--out", str(tmp_path / "c")])
    assert result.exit_code == 2, result.output
    assert "torch-cpu cannot be built object by object: it compiles nothing" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "c").exists()
