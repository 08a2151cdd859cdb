"""nvcc's host compiler wrapper and launcher (kernelnix.compile.nvcc_host), run for real.

The line markers of a real `gcc -E` are mapped; the wrappers run the real compilers;
and a CUDA kernel built with `-lineinfo` and a device assert (data/lineinfo, built
by the build step in the CUDA Torch environment with /usr/local/cuda's nvcc) holds
no path of the build machine, while the neutral names its device code keeps are seen.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from cuda_venv import CUDA_VARIANT, find_cuda_torch

from kernelnix.compile.nvcc_host import (
    WRAPPER_DIR,
    configure_environment,
    host_compiler_definitions,
    prefix_maps,
    remap_line_markers,
)
from kernelnix.config import load_config
from kernelnix.plan.build import PlanOptions, build_plan

LINEINFO = Path(__file__).parent / "data" / "lineinfo"
GCC = shutil.which("gcc")

needs_gcc = pytest.mark.skipif(GCC is None, reason="gcc is not installed")


def preprocess(source: Path, *options: str) -> bytes:
    return subprocess.run(
        [GCC or "gcc", "-E", *options, source.name],
        cwd=source.parent,
        check=True,
        capture_output=True,
    ).stdout


def markers(text: bytes) -> set[str]:
    return {m.decode() for m in re.findall(rb'^# \d+ "([^"]*)"', text, re.MULTILINE)}


def test_prefix_maps_are_read_in_order_from_both_options() -> None:
    args = [
        "-O2",
        "-ffile-prefix-map=/a=/x",
        "-fdebug-prefix-map=/a/b=/y=z",
        "-fmacro-prefix-map=/c=/w",
    ]
    assert prefix_maps(args) == [("/a", "/x"), ("/a/b", "/y=z")]


@needs_gcc
def test_line_markers_of_gcc_output_are_made_absolute_and_mapped(tmp_path: Path) -> None:
    headers = tmp_path / "site" / "include"
    headers.mkdir(parents=True)
    (headers / "inner.h").write_text("int inner(void);\n")
    (tmp_path / "work").mkdir()
    source = tmp_path / "work" / "a.c"
    source.write_text('#include "inner.h"\nint a(void) { return inner(); }\n')
    text = preprocess(source, f"-I{headers}")
    assert {"a.c", f"{headers}/inner.h"} <= markers(text)
    maps = [(str(tmp_path), "/general"), (str(tmp_path / "site"), "/kernelnix/site")]
    cwd = os.getcwd()
    os.chdir(source.parent)
    try:
        mapped = remap_line_markers(text, maps)
    finally:
        os.chdir(cwd)
    # The last matching map wins; gcc's own names (<built-in>) are left as they are.
    assert {"/general/work/a.c", "/kernelnix/site/include/inner.h", "<built-in>"} <= markers(mapped)
    assert str(tmp_path).encode() not in mapped
    assert mapped.replace(b"\n", b"").count(b"int inner(void);") == 1


@needs_gcc
def test_wrappers_run_the_compilers_with_their_times(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("KERNELNIX_CACHE", str(tmp_path / "cache"))
    definitions = host_compiler_definitions(tmp_path / "work", "/usr/bin/ccache")
    # One folder for every copy of a kernel: ccache hashes -ccbin as written.
    assert host_compiler_definitions(tmp_path / "elsewhere", "/usr/bin/ccache") == definitions
    (directory,) = (tmp_path / "cache" / WRAPPER_DIR).iterdir()
    real = Path(GCC or "gcc")
    assert definitions == [
        f"-DCMAKE_CUDA_HOST_COMPILER={directory / real.name}",
        f"-DCMAKE_CUDA_COMPILER_LAUNCHER={directory / 'launch'};/usr/bin/ccache",
    ]
    # Newer CMake takes CUDAHOSTCXX (the hermetic toolchain's g++) before the definition.
    environment = configure_environment(definitions)
    assert environment is not None and environment["CUDAHOSTCXX"] == str(directory / real.name)
    assert configure_environment(["-DCMAKE_CUDA_COMPILER_LAUNCHER=ccache"]) is None
    for name, compiler in ((real.name, real), ("g++", real.with_name("g++"))):
        wrapper = directory / name
        assert wrapper.stat().st_mtime_ns == compiler.stat().st_mtime_ns
        assert first_line(wrapper, "--version") == first_line(compiler, "--version")
    # The launcher hands the command the source after -c relative to the working directory.
    source = tmp_path / "src" / "x.c"
    shown = subprocess.run(
        [
            directory / "launch",
            sys.executable,
            "-c",
            "import sys; print(sys.argv[1:])",
            "-c",
            source,
        ],
        cwd=directory,
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    assert shown.strip() == str(["-c", os.path.relpath(source, directory)])


def test_without_a_writable_cache_the_wrappers_are_in_the_work_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "cache").write_text("a file, not a folder")
    monkeypatch.setenv("KERNELNIX_CACHE", str(tmp_path / "cache"))
    definitions = host_compiler_definitions(tmp_path / "work", None)
    assert (
        definitions[1]
        == f"-DCMAKE_CUDA_COMPILER_LAUNCHER={tmp_path / 'work' / WRAPPER_DIR / 'launch'}"
    )


def first_line(program: Path, *args: str) -> str:
    done = subprocess.run([program, *args], check=True, capture_output=True, text=True)
    return done.stdout.splitlines()[0]


@pytest.mark.slow
def test_device_code_built_with_lineinfo_holds_no_path_of_the_build(tmp_path: Path) -> None:
    cuda = find_cuda_torch()
    plan = build_plan(
        load_config(LINEINFO), PlanOptions(systems=("x86_64-linux",), unique_id="li1")
    )
    plan_file = tmp_path / "plan.json"
    plan_file.write_text(plan.to_json())
    work = tmp_path / "work"
    subprocess.run(
        [
            cuda.python,
            "-m",
            "kernelnix",
            "build-variant",
            "--plan",
            plan_file,
            "--variant",
            CUDA_VARIANT,
            "--source",
            LINEINFO,
            "--out",
            tmp_path / "out",
            "--work-dir",
            work,
            "--jobs",
            "1",
            "--no-import-check",
        ],
        env=cuda.env,
        check=True,
        capture_output=True,
    )
    library = next((tmp_path / "out" / CUDA_VARIANT).glob("*.so"))
    data = library.read_bytes()
    site = subprocess.run(
        [
            cuda.python,
            "-c",
            "import torch, os; print(os.path.dirname(os.path.dirname(torch.__file__)))",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    machine = [
        str(work),
        str(tmp_path),
        site,
        "/usr/local/cuda",
        "/tmp/",
        "/nix/store/",
        str(Path.home()),
        str(LINEINFO),
    ]
    assert [path for path in machine if path.encode() in data] == []
    # What the device code keeps instead (uncompressed: --compress-mode=none): the
    # line table's folders of the kernel and of Torch's headers, the assert's file.
    for neutral in (b"/kernelnix/work/project/kernel/lineinfo", b"/kernelnix/site/torch/include"):
        assert neutral in data
    # The assert's message, then its function and file: relative as nvcc got it, or
    # the work directory's neutral name.
    message = data.index(b"i < n\x00")
    assert re.search(rb"\x00(\.\./|/kernelnix/work/)project/kernel/lineinfo/scale\.cu\x00",
                     data[message : message + 200])  # fmt: skip
