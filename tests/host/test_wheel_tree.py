"""kernelnix.host.wheel_tree on real zip files: unpacking keeps executable bits and
refuses entries outside the wheel; merging links one wheel's directories whole,
fills shared ones entry by entry, hard-links programs, adds linker names and
nvcc's lib64; a failure leaves nothing behind."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kernelnix.host import wheel_tree
from kernelnix.host.wheel_tree import TreeError, find_nvcc, merge, unpack


def make_wheel(path: Path, files: dict[str, tuple[bytes, int]]) -> Path:
    """A zip file with `name -> (content, mode)` entries, as wheels store them."""
    with zipfile.ZipFile(path, "w") as archive:
        for name, (content, mode) in files.items():
            info = zipfile.ZipInfo(name)
            info.external_attr = (0o100000 | mode) << 16
            archive.writestr(info, content)
    return path


@pytest.fixture
def toolkit(tmp_path: Path) -> list[Path]:
    """Three unpacked wheels shaped like NVIDIA's CUDA 13 ones."""
    nvcc = make_wheel(tmp_path / "nvcc.whl", {
        "nvidia/__init__.py": (b"", 0o644),
        "nvidia/cu13/bin/nvcc": (b"#!/bin/sh\n", 0o755),
        "nvidia/cu13/bin/crt/link.stub": (b"stub", 0o644),
        "nvidia_cuda_nvcc-13.0.88.dist-info/METADATA": (b"Name: nvidia-cuda-nvcc\n", 0o644),
    })  # fmt: skip
    runtime = make_wheel(tmp_path / "runtime.whl", {
        "nvidia/__init__.py": (b"", 0o644),
        "nvidia/cu13/include/cuda_runtime.h": (b"/* runtime */", 0o644),
        "nvidia/cu13/lib/libcudart.so.13": (b"\x7fELF", 0o755),
        "nvidia/cu13/lib/libcudart_static.a": (b"!<arch>", 0o644),
    })  # fmt: skip
    torch = make_wheel(tmp_path / "torch.whl", {
        "torch/__init__.py": (b"", 0o644),
        "torch/lib/libc10.so": (b"\x7fELF", 0o755),
    })  # fmt: skip
    return [unpack(w, tmp_path / "unpacked" / w.stem) for w in (nvcc, runtime, torch)]


def test_unpack_keeps_executable_bits(toolkit: list[Path]) -> None:
    nvcc = toolkit[0] / "nvidia" / "cu13" / "bin" / "nvcc"
    assert os.access(nvcc, os.X_OK)
    assert not os.access(toolkit[0] / "nvidia" / "cu13" / "bin" / "crt" / "link.stub", os.X_OK)


def test_unpack_refuses_an_entry_outside_the_wheel(tmp_path: Path) -> None:
    bad = make_wheel(tmp_path / "bad.whl", {"../escaped": (b"x", 0o644)})
    with pytest.raises(TreeError, match="outside its root"):
        unpack(bad, tmp_path / "out")
    assert not (tmp_path / "out").exists() and not (tmp_path / "escaped").exists()
    assert [p.name for p in tmp_path.iterdir()] == ["bad.whl"]


def test_unpack_refuses_a_file_that_is_not_a_zip(tmp_path: Path) -> None:
    broken = tmp_path / "broken.whl"
    broken.write_bytes(b"not a zip")
    with pytest.raises(TreeError, match="is not a wheel"):
        unpack(broken, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_merge_links_single_trees_and_fills_shared_ones(
    toolkit: list[Path], tmp_path: Path
) -> None:
    env = merge(tmp_path / "env", toolkit)
    root = env / "nvidia" / "cu13"
    # Only torch has torch/: one link. nvidia/cu13 is shared: a directory.
    assert (env / "torch").is_symlink()
    assert root.is_dir() and not root.is_symlink()
    assert (root / "include").is_symlink()  # only the runtime wheel has include/
    # Programs are hard links: nvcc finds ../include and ../lib64 from its own path.
    nvcc = root / "bin" / "nvcc"
    assert not nvcc.is_symlink() and nvcc.stat().st_nlink == 2
    assert (root / "bin" / "crt" / "link.stub").read_bytes() == b"stub"
    # The linker's names: libcudart.so beside libcudart.so.13, lib64 -> lib.
    assert os.readlink(root / "lib" / "libcudart.so") == "libcudart.so.13"
    assert os.readlink(root / "lib64") == "lib"
    assert (root / "lib64" / "libcudart_static.a").is_file()
    assert find_nvcc(env) == nvcc
    # The same file in two wheels: one entry.
    assert (env / "nvidia" / "__init__.py").is_symlink()


def test_merge_of_a_missing_tree_leaves_nothing(toolkit: list[Path], tmp_path: Path) -> None:
    with pytest.raises(TreeError, match="not unpacked"):
        merge(tmp_path / "env", [*toolkit, tmp_path / "missing"])
    assert not (tmp_path / "env").exists()
    assert [p for p in tmp_path.iterdir() if p.name.startswith(".env")] == []


def test_unpack_writes_the_same_bytecode_each_time_and_imports_use_it(tmp_path: Path) -> None:
    """Each unpack compiles the wheel's Python files (the store is read-only: an
    import could not cache them); a set constant's order does not depend on the
    hash seed; a file that does not compile is left without; an import through
    the merged environment loads the bytecode."""
    wheel = make_wheel(tmp_path / "pkg.whl", {
        "pkg/__init__.py": (b"known = lambda n: n in {'relu', 'silu', 'gelu', 'tanh'}\n", 0o644),
        "pkg/future.py": (b"match = lambda: (yield from)\n", 0o644),
    })  # fmt: skip
    cache = tmp_path / "unpacked" / "pkg" / "__pycache__"
    compiled = []
    for _ in range(2):  # at the same path, as Nix builds: the bytecode names it
        shutil.rmtree(tmp_path / "unpacked", ignore_errors=True)
        unpack(wheel, tmp_path / "unpacked")
        compiled.append({p.name: p.read_bytes() for p in cache.iterdir()})
    assert list(compiled[0]) == [f"__init__.{sys.implementation.cache_tag}.pyc"]
    assert compiled[0] == compiled[1]
    merge(tmp_path / "env", [tmp_path / "unpacked"])
    env = {**os.environ, "PYTHONPATH": str(tmp_path / "env"), "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-v", "-c", "import pkg"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert f"code object from '{tmp_path / 'env' / 'pkg' / '__pycache__'}" in done.stderr


def test_the_script_runs_without_kernelnix(toolkit: list[Path], tmp_path: Path) -> None:
    """Nix runs the file as a script, in a Python that may not have kernelnix."""
    script = Path(wheel_tree.__file__)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    done = subprocess.run(
        [sys.executable, "-I", script, "merge", tmp_path / "env", *toolkit],
        capture_output=True, text=True, env=env, cwd=tmp_path, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    nvcc = subprocess.run(
        [sys.executable, "-I", script, "nvcc", tmp_path / "env"], capture_output=True, text=True
    )
    assert nvcc.stdout.strip() == str(tmp_path / "env" / "nvidia" / "cu13" / "bin" / "nvcc")
    again = subprocess.run(
        [sys.executable, "-I", script, "merge", tmp_path / "env", *toolkit],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert again.returncode == 1 and "exists already" in again.stderr


def test_the_script_unpacks_several_wheels_in_one_run(tmp_path: Path) -> None:
    """`unpack WHEEL DIR WHEEL DIR`: each wheel into its own directory, compiled (the
    hermetic toolchain's Python unpacks its dozens of wheels so); `bytecode DIR`
    compiles a tree; an unpaired argument is a usage error that unpacks nothing."""
    script = Path(wheel_tree.__file__)
    one = make_wheel(tmp_path / "one.whl", {"one/__init__.py": (b"A = 1\n", 0o644)})
    two = make_wheel(tmp_path / "two.whl", {"two/run": (b"#!/bin/sh\n", 0o755)})
    done = subprocess.run(
        [sys.executable, "-I", script, "unpack", one, tmp_path / "1", two, tmp_path / "2"],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert (tmp_path / "1" / "one" / "__init__.py").read_text() == "A = 1\n"
    assert list((tmp_path / "1" / "one" / "__pycache__").glob("__init__.*.pyc"))
    assert os.access(tmp_path / "2" / "two" / "run", os.X_OK)
    # `bytecode DIR`: a tree of its own (the hermetic Python's standard library).
    library = tmp_path / "lib"
    (library / "json").mkdir(parents=True)
    (library / "json" / "decoder.py").write_text("A = 1\n")
    compiled = subprocess.run(
        [sys.executable, "-I", script, "bytecode", library], capture_output=True, text=True
    )
    assert compiled.returncode == 0, compiled.stderr
    assert list((library / "json" / "__pycache__").glob("decoder.*.pyc"))
    unpaired = subprocess.run(
        [sys.executable, "-I", script, "unpack", one, tmp_path / "3", two],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    assert unpaired.returncode == 2 and "usage: wheel_tree.py unpack" in unpaired.stderr
    assert not (tmp_path / "3").exists()


def test_a_pth_file_of_a_wheel_runs_when_the_environment_is_on_pythonpath(
    tmp_path: Path,
) -> None:
    """nvidia-cutlass-dsl's shape: its `cutlass` package is importable only through
    the `.pth` file pip puts into site-packages."""
    dsl = make_wheel(tmp_path / "dsl.whl", {
        "dsl_packages.pth": (b"import sys, os, dsl_base; sys.path.insert(0, "
                             b"os.path.join(dsl_base.__path__[0], 'packages'))\n", 0o644),
    })  # fmt: skip
    base = make_wheel(tmp_path / "base.whl", {
        "dsl_base/__init__.py": (b"", 0o644),
        "dsl_base/packages/cutlass_like/__init__.py": (b"NAME = 'cutlass_like'\n", 0o644),
    })  # fmt: skip
    # An environment before it with a .pth file of its own (setuptools has one).
    first = make_wheel(tmp_path / "first.whl", {
        "first.pth": (b"import os; os.environ['FIRST_PTH'] = 'ran'\n", 0o644),
    })  # fmt: skip
    unpacked = [unpack(w, tmp_path / "unpacked" / w.stem) for w in (dsl, base, first)]
    env = merge(tmp_path / "env", unpacked[:2])
    before = merge(tmp_path / "before", unpacked[2:])
    done = subprocess.run(
        [
            sys.executable,
            "-c",
            "import os, cutlass_like; print(cutlass_like.NAME, os.environ['FIRST_PTH'])",
        ],
        env={**os.environ, "PYTHONPATH": f"{before}:{env}"},
        capture_output=True,
        text=True,
    )
    assert done.stdout == "cutlass_like ran\n", done.stderr
    # Without a .pth file, no hook: the Python's own sitecustomize stays in effect.
    plain = merge(tmp_path / "plain", unpacked[1:2])
    assert not (plain / "sitecustomize.py").exists()
