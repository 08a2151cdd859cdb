"""kernelnix.emit: escaping, the CMake project of a variant, registration.h, _ops.py."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from handmade import relu_with_shared_sources
from paths import EXAMPLES

from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.emit.cmake import check_cmake_values, cmake_project, noarch_ops_py, stable_abi_hex
from kernelnix.emit.escape import UnsafeCMakeValue, cmake_bracket, cmake_problem
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import Plan

SYSTEM = "x86_64-linux"
UNIQUE = "abc1234"
CMAKE = shutil.which("cmake")

# Values a bracket argument must carry verbatim: CMake syntax, quotes, brackets.
VERBATIM = [
    "plain",
    "",
    ")",
    "$FOO {x}",
    "$",
    '"quoted"',
    "a b  c",
    r"back\slash\n",
    "]]",
    "]=]",
    "x]",
    "x]=",
    "[[nested]]",
    "[==[ ]==]] ]=] ]]",
    "#comment",
    ')"message(FATAL_ERROR injected)',
    "$ <x>",
]
REJECTED = [
    "#[[",
    "[x",
    "${FOO}",
    "$ENV{HOME}",
    "$CACHE{X}",
    "a;b",
    "line\nbreak",
    "cr\r",
    "tab\t",
    "nul\x00",
    "$<1:x>",
    "\x7f",
]


def plan_of(example: str, unique: str = UNIQUE) -> Plan:
    return build_plan(
        load_config(EXAMPLES / example), PlanOptions(systems=(SYSTEM,), unique_id=unique)
    )


@pytest.mark.skipif(CMAKE is None, reason="cmake is not installed")
def test_bracket_arguments_reach_cmake_verbatim(tmp_path: Path) -> None:
    """Each value, set through its bracket argument, is the same string in CMake."""
    lines = [
        f"set(value {cmake_bracket(value)})\nfile(WRITE {cmake_bracket(tmp_path / str(i))} "
        '"${value}")'
        for i, value in enumerate(VERBATIM)
    ]
    script = tmp_path / "script.cmake"
    script.write_text("\n".join(lines) + "\n")
    subprocess.run([CMAKE, "-P", str(script)], check=True, capture_output=True)
    for i, value in enumerate(VERBATIM):
        assert (tmp_path / str(i)).read_text() == value


@pytest.mark.parametrize("value", REJECTED)
def test_unsafe_values_are_rejected(value: str) -> None:
    assert cmake_problem(value)
    with pytest.raises(UnsafeCMakeValue):
        cmake_bracket(value)


@pytest.mark.parametrize("value", VERBATIM)
def test_bracket_length_avoids_the_closing_bracket(value: str) -> None:
    quoted = cmake_bracket(value)
    fence = quoted[1 : quoted.index("[", 1)]
    assert quoted == f"[{fence}[{value}]{fence}]"
    # The first closing bracket CMake finds is the one after the value.
    assert (value + f"]{fence}]").index(f"]{fence}]") == len(value)


def test_stable_abi_target_version() -> None:
    assert stable_abi_hex("2.12") == "0x020c000000000000"
    assert stable_abi_hex("2.9") == "0x0209000000000000"


@pytest.mark.parametrize(
    ("example", "variant", "golden_name"),
    [
        ("relu", "torch213-cxx11-cpu-x86_64-linux", "relu-cpu"),
        ("relu", "torch213-cxx11-cu130-x86_64-linux", "relu-cu130"),
        ("relu", "torch213-cxx11-rocm72-x86_64-linux", "relu-rocm72"),
        ("relu-stable-abi", "torch-stable-abi212-cpu-x86_64-linux", "relu-stable-abi-cpu"),
        ("multi-kernel", "torch213-cxx11-cpu-x86_64-linux", "multi-kernel-cpu"),
        ("cute-scale", "torch214-cxx11-cu130-x86_64-linux", "cute-scale-cu130"),
        ("fused-scale", "torch214-cxx11-cu130-x86_64-linux", "fused-scale-cu130"),
        ("relu-tvm-ffi", "tvm-ffi01-cpu-x86_64-linux", "relu-tvm-ffi-cpu"),
        ("relu-tvm-ffi", "tvm-ffi01-cu130-x86_64-linux", "relu-tvm-ffi-cu130"),
    ],
)
def test_cmake_project_golden(example: str, variant: str, golden_name: str, golden: Any) -> None:
    files = cmake_project(plan_of(example), SYSTEM, variant)
    golden(f"emit/{golden_name}/CMakeLists.txt", files["CMakeLists.txt"])
    golden(f"emit/{golden_name}/_ops.py", files["_ops.py"])


def test_static_project_files_golden(golden: Any) -> None:
    files = cmake_project(plan_of("relu"), SYSTEM, "torch213-cxx11-cpu-x86_64-linux")
    golden("emit/registration.h", files["include/registration.h"])
    assert files["torch-ext/registration.h"] == files["include/registration.h"]
    golden("emit/kernelnix.cmake", files["kernelnix.cmake"])
    assert files["probe_torch.py"].startswith('"""Where Torch is')


def test_noarch_ops_golden(golden: Any) -> None:
    golden("emit/noarch/_ops.py", noarch_ops_py("relu_noarch", UNIQUE))


def _component_blocks(cmakelists: str) -> dict[str, str]:
    """Target name -> the CMake text of that component (up to the next one)."""
    blocks = cmakelists.split("\nkernelnix_component(")[1:]
    blocks[-1] = blocks[-1].split("\nadd_library(")[0]
    return {block.split("]]")[0].lstrip("["): block for block in blocks}


def test_the_binding_sees_its_kernels_header_dependencies() -> None:
    """As every source of kernel-builder's one extension target: kernels-community's
    flash-attn3 binding (flash-attn/flash_api_stable.cpp) includes CUTLASS."""
    files = cmake_project(plan_of("cute-scale"), SYSTEM, "torch214-cxx11-cu130-x86_64-linux")
    blocks = _component_blocks(files["CMakeLists.txt"])
    dependency = "kernelnix_component_dependency([[kernelnix_binding]] [[cutlass_3_8]])"
    assert dependency in blocks["kernelnix_binding"]
    files = cmake_project(plan_of("relu"), SYSTEM, "torch213-cxx11-cpu-x86_64-linux")
    assert "kernelnix_component_dependency" not in files["CMakeLists.txt"]


def test_kernel_flags_only_on_their_kernel() -> None:
    files = cmake_project(plan_of("multi-kernel"), SYSTEM, "torch213-cxx11-cpu-x86_64-linux")
    blocks = _component_blocks(files["CMakeLists.txt"])
    assert set(blocks) == {
        "kernelnix_binding",
        "kernel_activation_avx2",
        "kernel_activation_portable",
        "kernel_scale",
    }
    for target, block in blocks.items():
        assert ("[[-mavx2]]" in block) == (target == "kernel_activation_avx2")
        assert ("[[-mfma]]" in block) == (target == "kernel_activation_avx2")


def test_a_source_several_kernels_list_is_compiled_by_the_first_with_each_ones_flags(
    tmp_path: Path,
) -> None:
    kernel = relu_with_shared_sources(
        tmp_path,
        '\n[kernel.relu_second]\nbackend = "cpu"\ndepends = ["torch"]\n'
        'src = ["relu_cpu/relu_cpu.cpp", "relu_cpu/second.h"]\n'
        'cxx-flags = ["-DSECOND"]\n'
        '\n[kernel.relu_third]\nbackend = "cpu"\ndepends = ["torch"]\n'
        'src = ["relu_cpu/relu_cpu.cpp"]\ncxx-flags = ["-DTHIRD"]\n',
    )
    plan = build_plan(load_config(kernel), PlanOptions(systems=(SYSTEM,), unique_id=UNIQUE))
    blocks = _component_blocks(
        cmake_project(plan, SYSTEM, "torch213-cxx11-cpu-x86_64-linux")["CMakeLists.txt"]
    )
    # The third kernel lists nothing the first does not compile: no target of its own.
    assert set(blocks) == {"kernelnix_binding", "kernel_relu_cpu", "kernel_relu_second"}
    assert "[[relu_cpu/relu_cpu.cpp]]" in blocks["kernel_relu_cpu"]
    assert "[[relu_cpu/relu_cpu.cpp]]" not in blocks["kernel_relu_second"]
    assert "[[relu_cpu/second.h]]" in blocks["kernel_relu_second"]
    options = blocks["kernel_relu_cpu"].split("set(options")[1].split(")")[0].split()
    assert options == ["[[-DSECOND]]", "[[-DTHIRD]]"]


def test_the_generated_ops_module_loads_the_library_relatively() -> None:
    ops = cmake_project(plan_of("relu"), SYSTEM, "torch213-cxx11-cpu-x86_64-linux")["_ops.py"]
    assert f"from . import _relu_cpu_{UNIQUE}" in ops
    assert f"ops = torch.ops._relu_cpu_{UNIQUE}" in ops


def test_a_tvm_ffi_project_uses_tvm_ffi_not_torch() -> None:
    files = cmake_project(plan_of("relu-tvm-ffi"), SYSTEM, "tvm-ffi01-cpu-x86_64-linux")
    assert sorted(files) == ["CMakeLists.txt", "_ops.py", "kernelnix.cmake"]
    cmake = files["CMakeLists.txt"]
    assert "kernelnix_tvm_ffi_target([[cpu]] [[0.1]])" in cmake
    assert "probe_torch" not in cmake
    assert "SUFFIX [[.so]]" in cmake
    library = f'Path(__file__).parent / "_relu_tvm_ffi_cpu_{UNIQUE}.so"'
    assert f"tvm_ffi.load_module({library})" in files["_ops.py"]


def test_noarch_ops_module_picks_the_namespace_at_import() -> None:
    namespace: dict[str, Any] = {}
    exec(compile(noarch_ops_py("relu_noarch", UNIQUE), "_ops.py", "exec"), namespace)
    assert namespace["_OPS_NAME"] == f"_relu_noarch_cpu_{UNIQUE}"
    assert namespace["add_op_namespace_prefix"]("relu") == f"_relu_noarch_cpu_{UNIQUE}::relu"


def test_noarch_variants_have_no_cmake_project() -> None:
    with pytest.raises(UserError) as caught:
        cmake_project(plan_of("relu-noarch"), SYSTEM, "torch-cpu")
    assert "is noarch: it has no CMake project" in caught.value.render()


def test_unknown_variant_lists_the_valid_ones() -> None:
    with pytest.raises(UserError) as caught:
        cmake_project(plan_of("relu"), SYSTEM, "torch299-cxx11-cpu-x86_64-linux")
    assert "torch213-cxx11-cpu-x86_64-linux" in caught.value.render()


def _injected_kernel(tmp_path: Path, flags: list[str], sources: list[str]) -> Path:
    kernel = tmp_path / "inject"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("build"))
    build_toml = kernel / "build.toml"
    text = build_toml.read_text().replace(
        'src = ["relu_cpu/relu_cpu.cpp"]',
        f"src = {json.dumps(sources)}\ncxx-flags = {json.dumps(flags)}",
    )
    build_toml.write_text(text)
    for source in sources:
        (kernel / source).parent.mkdir(parents=True, exist_ok=True)
        (kernel / source).touch()
    return kernel


def test_unsafe_build_toml_values_are_reported_with_their_key(tmp_path: Path) -> None:
    kernel = _injected_kernel(
        tmp_path, ["-DA=1;message(boom)", "-DB=\n"], ["a;b.cpp", "${CMAKE_COMMAND}.cpp", 'x)"y.cpp']
    )
    plan = build_plan(load_config(kernel), PlanOptions(systems=(SYSTEM,), unique_id=UNIQUE))
    with pytest.raises(UserError) as caught:
        check_cmake_values(plan, plan.variant(SYSTEM, "torch213-cxx11-cpu-x86_64-linux"))
    rendered = caught.value.render()
    assert "kernel.relu_cpu.cxx-flags[0]" in rendered
    assert "kernel.relu_cpu.cxx-flags[1]" in rendered
    assert "kernel.relu_cpu.src[0]" in rendered
    assert "kernel.relu_cpu.src[1]" in rendered
    assert "kernel.relu_cpu.src[2]" in rendered
    assert "list separator" in rendered
    assert "control character" in rendered


INJECTED_FLAG = '-DINJECTED=")\\" message(FATAL_ERROR injected) #[[x]]"'
INJECTED_SOURCE = "odd dir/k.cpp"


@pytest.mark.skipif(CMAKE is None, reason="cmake is not installed")
def test_injection_attempts_arrive_verbatim_and_never_run(tmp_path: Path) -> None:
    """A flag and a path full of CMake syntax configure, compile, and reach the
    compiler as one argument each, unchanged; the injected message() never runs."""
    kernel = _injected_kernel(tmp_path, [INJECTED_FLAG, "-DPLAIN=1"], [INJECTED_SOURCE])
    source = kernel / INJECTED_SOURCE
    source.write_text(
        "#include <string_view>\n"
        'static_assert(std::string_view(INJECTED) == ")\\" message(FATAL_ERROR injected) '
        '#[[x]]");\nstatic_assert(PLAIN == 1);\n'
    )
    plan = build_plan(load_config(kernel), PlanOptions(systems=(SYSTEM,), unique_id=UNIQUE))
    project = tmp_path / "project"
    files = cmake_project(plan, SYSTEM, "torch213-cxx11-cpu-x86_64-linux")
    for name, text in {**files, "metadata.json": "{}"}.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    build = tmp_path / "cmake-build"
    configure = subprocess.run(
        [CMAKE, "-G", "Ninja", "-S", project, "-B", build, f"-DKERNEL_SOURCE_DIR={kernel}",
         f"-DPython_EXECUTABLE={sys.executable}"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert configure.returncode == 0, configure.stdout + configure.stderr
    assert "injected" not in configure.stdout + configure.stderr
    # The exact commands Ninja runs (its `$$` escapes resolved), then the real
    # compile: the static_assert checks the macro the compiler received.
    commands = subprocess.run(
        ["ninja", "-C", build, "-t", "commands"], capture_output=True, text=True, check=True
    ).stdout.splitlines()
    (arguments,) = [a for a in map(shlex.split, commands) if a[-2:] == ["-c", str(source)]]
    assert INJECTED_FLAG in arguments
    assert "-DPLAIN=1" in arguments
    subprocess.run(
        [CMAKE, "--build", build, "--target", "kernel_relu_cpu"], check=True, capture_output=True
    )
