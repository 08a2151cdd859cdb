"""Variant-level checks: layout, metadata, Python sources, discovery, the CLI and
the import through the `kernels` loader, on real variant directories."""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from importlib.metadata import version
from pathlib import Path

import pytest
from checks_corpus.corpus import Corpus, build_corpus, build_extension_module
from click.testing import CliRunner
from wheel_locks import LOADER, torch_range

from kernelnix.checks import (
    CheckOptions,
    ImportChild,
    check_tree,
    discover_variants,
    run_checks,
)
from kernelnix.checks.import_check import ALTERNATIVES_VARIABLE, alternatives_variables
from kernelnix.commands.check import check
from kernelnix.core.diagnostics import UserError
from kernelnix.core.version import Version

pytestmark = pytest.mark.slow

ARCH = "torch213-cxx11-cpu-x86_64-linux"
KERNEL_ID = "_kncheck_cpu_abc1234"
OPS = f'''import torch

from . import {KERNEL_ID}

ops = torch.ops.{KERNEL_ID}


def add_op_namespace_prefix(op_name: str) -> str:
    return f"{KERNEL_ID}::{{op_name}}"
'''
INIT = """import torch

from ._ops import add_op_namespace_prefix, ops


@torch.library.custom_op(add_op_namespace_prefix("twice"), mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


__all__ = ["ops", "twice"]
"""
NO_IMPORT = CheckOptions(import_check=False)


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    return build_corpus()


@pytest.fixture(scope="session")
def extension(corpus: Corpus) -> Path:
    """A real abi3 extension module named after the kernel id."""
    return build_extension_module(KERNEL_ID, corpus.root / f"{KERNEL_ID}.abi3.so")


def make_variant(
    root: Path,
    name: str = ARCH,
    *,
    backend: str = "cpu",
    library: Path | None = None,
    files: dict[str, str] | None = None,
    metadata: dict[str, object] | None = None,
) -> Path:
    variant = root / name
    variant.mkdir(parents=True)
    data: dict[str, object] = {
        "name": "kncheck",
        "id": KERNEL_ID,
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "backend": {"type": backend},
    }
    data.update(metadata or {})
    (variant / "metadata.json").write_text(json.dumps(data))
    contents = {"__init__.py": INIT, "_ops.py": OPS}
    if name.startswith("torch-") and not name.startswith("torch-stable-abi"):
        contents["_ops.py"] = OPS.replace(f"from . import {KERNEL_ID}\n", "")
    contents.update(files or {})
    for relative, text in contents.items():
        (variant / relative).parent.mkdir(parents=True, exist_ok=True)
        (variant / relative).write_text(text)
    if library is not None:
        shutil.copy(library, variant / f"{KERNEL_ID}.abi3.so")
    return variant


def found(variant: Path, options: CheckOptions = NO_IMPORT) -> set[tuple[str, str, str]]:
    """The errors (what fails the variant), as (rule, file, subject)."""
    report = run_checks(variant, options)
    return {(v.rule, v.file, v.subject) for v in report.errors}


# ---------------------------------------------------------------------------
# A complete variant, imported through the real loader


def test_clean_arch_variant_passes_every_check(tmp_path: Path, extension: Path) -> None:
    variant = make_variant(tmp_path / "build", library=extension)
    report = run_checks(variant, CheckOptions())
    assert report.violations == [], report.render()
    assert report.ok
    assert report.notes == []
    assert not (variant / "__pycache__").exists()  # the import wrote no bytecode
    assert report.summary().startswith(f"ok    {ARCH}: no violations")


def test_clean_noarch_variant_imports(tmp_path: Path) -> None:
    variant = make_variant(tmp_path / "build", "torch-cpu")
    report = run_checks(variant, CheckOptions())
    assert report.violations == [], report.render()


def test_import_failure_reports_the_loaders_error(tmp_path: Path, extension: Path) -> None:
    init = INIT + '\nraise RuntimeError("kernel exploded at import")\n'
    variant = make_variant(tmp_path / "build", library=extension, files={"__init__.py": init})
    report = run_checks(variant, CheckOptions())
    (violation,) = report.violations
    assert violation.rule == "import"
    assert "RuntimeError: kernel exploded at import" in violation.found
    assert "kernels.get_local_kernel" in violation.fix
    assert violation.found.endswith(f" (with torch {version('torch')})")


def einops_site(root: Path, release: str, source: str = "") -> Path:
    """A site directory with an einops distribution of `release`."""
    site = root / f"einops-{release}"
    (site / "einops").mkdir(parents=True)
    (site / "einops" / "__init__.py").write_text(source)
    (site / f"einops-{release}.dist-info").mkdir()
    (site / f"einops-{release}.dist-info" / "METADATA").write_text(
        f"Name: einops\nVersion: {release}\n"
    )
    return site


def einops_user(tmp_path: Path, extension: Path) -> Path:
    """A variant with python-depends einops that imports `removed_api` from it."""
    init = INIT + "\nfrom einops import removed_api\n"
    return make_variant(
        tmp_path / "build",
        library=extension,
        files={"__init__.py": init},
        metadata={"python-depends": ["einops"]},
    )


def test_import_failure_names_the_releases_of_its_python_depends(
    tmp_path: Path, extension: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An API a python-depends dropped fails the import: the message names the
    release the variant's environment had."""
    monkeypatch.setenv("PYTHONPATH", str(einops_site(tmp_path, "0.8.2")))
    variant = einops_user(tmp_path, extension)
    (violation,) = run_checks(variant, CheckOptions()).violations
    assert "ImportError: cannot import name 'removed_api' from 'einops'" in violation.found
    assert violation.found.endswith(f" (with torch {version('torch')}, einops 0.8.2)")


def test_a_variant_loads_with_the_first_locked_release_it_can(
    tmp_path: Path, extension: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Where the lock holds several releases of a python-depends, a variant that
    fails with the first is checked with the others in turn (their environments
    named as the build step names them), and passes with one it loads with."""
    newest = einops_site(tmp_path, "0.9.0")
    older = einops_site(tmp_path, "0.8.0")
    oldest = einops_site(tmp_path, "0.7.0", "removed_api = 1\n")
    monkeypatch.setenv("PYTHONPATH", str(newest))
    variables = alternatives_variables(newest, [older, oldest])
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    variant = einops_user(tmp_path, extension)
    report = run_checks(variant, CheckOptions())
    assert report.violations == [], report.render()
    (note,) = report.notes
    assert note.startswith(f"imported with torch {version('torch')}, einops 0.7.0, after the first")
    assert "cannot import name 'removed_api' from 'einops'" in note
    assert "(with torch" in note and "einops 0.9.0)" in note and "einops 0.8.0)" in note

    # With no release it loads with, the violation names each it failed with.
    monkeypatch.setenv(ALTERNATIVES_VARIABLE, str(older))
    (violation,) = run_checks(variant, CheckOptions()).violations
    assert violation.found.startswith("import failed: ImportError: cannot import name")
    first, other = violation.found.split("; with the lock's other releases of its python-depends: ")
    assert first.endswith("einops 0.9.0)") and other.endswith("einops 0.8.0)")


def test_variant_for_another_backend_is_not_imported(tmp_path: Path, extension: Path) -> None:
    variant = make_variant(
        tmp_path / "build", "torch213-cxx11-cu126-x86_64-linux", backend="cuda", library=extension
    )
    report = run_checks(variant, CheckOptions())
    assert report.violations == []
    (note,) = report.notes
    assert note.startswith("import check skipped: not loadable on this machine")
    assert "cu126" in note


def test_a_python_without_torch_skips_the_import(tmp_path: Path) -> None:
    """A noarch variant builds with any Python; the import check then says it skipped."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", venv], check=True)
    variant = make_variant(tmp_path / "build", "torch-cpu")
    report = run_checks(variant, CheckOptions(python=str(venv / "bin" / "python")))
    assert report.ok, report.render()
    (note,) = report.notes
    python = venv / "bin" / "python"
    assert note == f"import check skipped: not loadable on this machine ({python} has no Torch)"


def test_an_import_child_started_ahead_loads_the_variant_it_is_given(
    tmp_path: Path, extension: Path
) -> None:
    """The build step starts the interpreter before it compiles; the check then sends
    it the variant. The same failure is reported as by a child started at the check."""
    init = INIT + '\nraise RuntimeError("kernel exploded at import")\n'
    good = make_variant(tmp_path / "good", library=extension)
    bad = make_variant(tmp_path / "bad", library=extension, files={"__init__.py": init})
    with ImportChild(sys.executable) as child:
        work = child.work
        report = run_checks(good, CheckOptions(import_child=child))
    assert report.ok, report.render()
    assert not work.exists()  # its HOME and staging repository are removed
    with ImportChild(sys.executable) as child:
        (violation,) = run_checks(bad, CheckOptions(import_child=child)).violations
    assert "RuntimeError: kernel exploded at import" in violation.found


def test_a_torch_that_fails_to_import_is_the_variants_import_failure(
    tmp_path: Path, extension: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The child imports Torch ahead; when that fails, the check reports the loader's
    failed import of the variant, not a missing loader."""
    fake = tmp_path / "fake" / "torch"
    fake.mkdir(parents=True)
    (fake / "__init__.py").write_text('raise ImportError("torch is broken here")\n')
    variant = make_variant(tmp_path / "build", library=extension)
    monkeypatch.setenv("PYTHONPATH", str(fake.parent))
    (violation,) = run_checks(variant, CheckOptions()).violations
    assert violation.subject == "kernels.get_local_kernel"
    assert "torch is broken here" in violation.found


def test_an_import_child_that_loads_nothing_is_stopped(tmp_path: Path) -> None:
    """A build that fails to compile closes the interpreter it started: no process
    and no directory are left behind."""
    child = ImportChild(sys.executable)
    process = child._process
    assert process is not None
    child.close()
    assert process.poll() is not None
    assert not child.work.exists()


def test_an_import_child_without_an_interpreter_says_so(tmp_path: Path) -> None:
    missing = str(tmp_path / "no-python")
    with ImportChild(missing) as child:
        result = child.load(make_variant(tmp_path / "build", "torch-cpu"))
    assert result["status"] == "no-loader"
    assert result["python"] == missing


# ---------------------------------------------------------------------------
# Layout and metadata


def test_layout_violations(tmp_path: Path, corpus: Corpus) -> None:
    variant = make_variant(tmp_path, library=corpus.path("clean_c"))
    (variant / "_ops.py").unlink()
    (variant / "__pycache__").mkdir()
    (variant / "__pycache__" / "x.cpython-311.pyc").write_bytes(b"")
    (variant / "stray.pyc").write_bytes(b"")
    (variant / "helper.o").write_bytes(b"")
    (variant / "link.py").symlink_to("/etc/hostname")
    shutil.copy(corpus.path("clean_c"), variant / "libextra.so")
    assert found(variant) == {
        ("layout", "_ops.py", "_ops.py"),
        ("layout", "__pycache__", "__pycache__"),
        ("layout", "stray.pyc", "stray.pyc"),
        ("layout", "helper.o", "helper.o"),
        ("layout", "link.py", "link.py"),
        ("layout", "libextra.so", "libextra.so"),
    }


def test_arch_variant_needs_its_extension_library(tmp_path: Path, corpus: Corpus) -> None:
    variant = make_variant(tmp_path)
    assert found(variant) == {("layout", f"{KERNEL_ID}.abi3.so", f"{KERNEL_ID}.abi3.so")}
    shutil.copy(corpus.path("clean_c"), variant / f"{KERNEL_ID}.cpython-311-x86_64-linux-gnu.so")
    assert (
        "layout",
        f"{KERNEL_ID}.cpython-311-x86_64-linux-gnu.so",
        f"{KERNEL_ID}.cpython-311-x86_64-linux-gnu.so",
    ) in found(variant)


def test_noarch_variant_has_no_compiled_code(tmp_path: Path, corpus: Corpus) -> None:
    variant = make_variant(tmp_path, "torch-cpu")
    assert found(variant) == set()
    shutil.copy(corpus.path("clean_c"), variant / "fast.so")
    assert ("layout", "fast.so", "fast.so") in found(variant)


def test_ops_module_must_define_the_prefix_function(tmp_path: Path, corpus: Corpus) -> None:
    variant = make_variant(
        tmp_path,
        library=corpus.path("clean_c"),
        files={"_ops.py": "import torch\nops = torch.ops.x\n"},
    )
    assert found(variant) == {("layout", "_ops.py", "add_op_namespace_prefix")}


def test_metadata_problems(tmp_path: Path, corpus: Corpus) -> None:
    missing = make_variant(tmp_path / "a", library=corpus.path("clean_c"))
    (missing / "metadata.json").unlink()
    assert ("layout", "metadata.json", "metadata.json") in found(missing)

    broken = make_variant(tmp_path / "b", library=corpus.path("clean_c"))
    (broken / "metadata.json").write_text("{not json")
    assert {(r, s) for r, _, s in found(broken)} >= {("metadata", "metadata.json")}

    mismatch = make_variant(
        tmp_path / "c",
        library=corpus.path("clean_c"),
        metadata={"backend": {"type": "cuda"}, "id": "not-an-id"},
    )
    assert {
        ("variant-name", "metadata.json", "backend.type"),
        ("metadata", "metadata.json", "id"),
    } <= found(mismatch)


def test_metadata_against_the_model(tmp_path: Path) -> None:
    typed = make_variant(
        tmp_path / "a",
        "torch-cpu",
        metadata={"version": "1", "python-depends": "einops", "extra": 1},
    )
    assert {
        ("metadata", "metadata.json", "version"),
        ("metadata", "metadata.json", "python-depends"),
    } <= found(typed)
    assert not any(s == "extra" for _, _, s in found(typed))  # unknown keys are ignored
    clean = make_variant(tmp_path / "b", "torch-cpu")
    assert not {v for v in found(clean) if v[0] == "metadata"}


def test_unparseable_variant_name(tmp_path: Path) -> None:
    variant = make_variant(tmp_path, "mykernel-build")
    assert ("variant-name", ".", "mykernel-build") in found(variant)


# ---------------------------------------------------------------------------
# Python sources


PYTHON_RULES_SOURCE = """
from __future__ import annotations

import json
import os.path
from typing import TYPE_CHECKING

import numpy
import kncheck.layers
import torch
import triton
from torch.library import custom_op as make_op
from torch.library import Library, impl

from . import layers
from ._ops import add_op_namespace_prefix, ops

try:
    import scipy
except ImportError:
    scipy = None

if TYPE_CHECKING:
    import pandas


@torch.library.custom_op("kncheck::literal", mutates_args=())
def literal(x: torch.Tensor) -> torch.Tensor:
    return x


@torch.library.custom_op(add_op_namespace_prefix("good"), mutates_args=())
def good(x: torch.Tensor) -> torch.Tensor:
    return x


@good.register_kernel("cpu")
def _(x):
    return x


@torch.library.register_fake(f"{ops}::fstring")
def _(x):
    return x


torch.library.register_autograd(torch.ops.kncheck.literal, lambda ctx, g: g)
make_op("plain_name", mutates_args=())
impl("kncheck::other", "cpu")
lib = Library("kncheck", "FRAGMENT")
lib.define("fine(Tensor x) -> Tensor")
lib.define("kncheck::bad(Tensor x) -> Tensor")
good_lib = Library(ops.name, "FRAGMENT")
"""


def test_python_import_and_op_namespace_rules(tmp_path: Path, corpus: Corpus) -> None:
    files = {
        "layers/__init__.py": PYTHON_RULES_SOURCE,
        "__init__.py": INIT + "from . import layers\n",
    }
    variant = make_variant(tmp_path, library=corpus.path("clean_c"), files=files)
    violations = run_checks(variant, NO_IMPORT).violations
    got = {(v.rule, v.line, v.subject, v.severity) for v in violations}
    file = {v.file for v in violations}
    assert file == {"layers/__init__.py"}
    assert got == {
        ("python-import", 8, "numpy", "error"),
        ("python-import", 9, "kncheck.layers", "error"),
        ("python-import", 11, "triton", "error"),  # only CUDA/ROCm/XPU torch brings triton
        ("python-import", 19, "scipy", "note"),  # try/except ImportError
        ("python-import", 24, "pandas", "note"),  # if TYPE_CHECKING
        ("op-namespace", 27, "torch.library.custom_op('kncheck::literal')", "error"),
        ("op-namespace", 42, "torch.library.register_fake(f'{ops}::fstring')", "error"),
        ("op-namespace", 47, "torch.library.register_autograd(torch.ops.kncheck.literal)", "error"),
        ("op-namespace", 48, "make_op('plain_name')", "error"),
        ("op-namespace", 49, "impl('kncheck::other')", "error"),
        ("op-namespace", 50, "Library('kncheck')", "error"),
        ("op-namespace", 52, "lib.define('kncheck::bad(Tensor x) -> Tensor')", "error"),
    }


def test_declared_python_depends_and_backend_imports(tmp_path: Path, corpus: Corpus) -> None:
    source = "import einops\nimport triton\n"
    variant = make_variant(
        tmp_path,
        "torch213-cxx11-cu126-x86_64-linux",
        backend="cuda",
        library=corpus.path("clean_c"),
        files={"x.py": source},
        metadata={"python-depends": ["einops"]},
    )
    assert {r for r, _, _ in found(variant)} == set()
    loads_x = {"x.py": "import einops\n", "__init__.py": INIT + "from . import x\n"}
    cpu = make_variant(tmp_path / "cpu", "torch-cpu", files=loads_x)
    assert found(cpu) == {("python-import", "x.py", "einops")}
    assert found(cpu, CheckOptions(import_check=False, python_depends=("einops",))) == set()


def loading(source: str) -> dict[str, str]:
    """A kernel whose package imports x.py, holding `source`, when it loads."""
    return {"x.py": source, "__init__.py": INIT + "from . import x\n"}


def test_what_torch_and_the_loader_require_loads_with_every_kernel(
    tmp_path: Path, corpus: Corpus
) -> None:
    # The loader requires packaging and pyyaml, Torch jinja2 and sympy.
    source = "import packaging.version\nimport yaml\nimport jinja2\nimport sympy\n"
    assert found(make_variant(tmp_path / "cpu", "torch-cpu", files=loading(source))) == set()
    # Triton comes with Torch's CUDA builds: a CUDA variant or a universal (Triton)
    # kernel may import it when it loads.
    cuda = make_variant(
        tmp_path / "cuda",
        "torch214-cxx11-cu130-x86_64-linux",
        backend="cuda",
        library=corpus.path("clean_c"),
        files=loading("import triton\n"),
    )
    assert found(cuda) == set()
    for backend in ("cuda", "rocm", "xpu"):
        noarch = make_variant(
            tmp_path / backend,
            f"torch-{backend}",
            backend=backend,
            files=loading("import triton\n"),
        )
        assert found(noarch) == set()


def test_a_module_the_variant_s_torch_lacks_says_which_torch_has_it(tmp_path: Path) -> None:
    variant = make_variant(tmp_path, "torch-cpu", files=loading("import triton.language\n"))
    (violation,) = run_checks(variant, NO_IMPORT).errors
    assert violation.subject == "triton.language"
    assert violation.found.startswith(
        "imported when the kernel loads, but it is not in the standard library, not required "
        f"by the cpu builds of Torch {torch_range('cpu')} or by the kernels {LOADER} loader"
    )
    assert violation.found.endswith(
        "; it comes with the cuda builds of Torch, not with this variant's Torch"
    )


def test_a_missing_module_the_rule_refuses_is_one_violation(tmp_path: Path) -> None:
    """gpt-oss-triton-kernels' CPU variant: triton, imported when it loads, is not in
    a CPU Torch. The import check fails on it too; the rule says why, once."""
    assert importlib.util.find_spec("triton") is None
    variant = make_variant(tmp_path, "torch-cpu", files=loading("import triton\n"))
    (violation,) = run_checks(variant, CheckOptions()).violations
    assert (violation.rule, violation.subject) == ("python-import", "triton")
    # A missing module the rule allows (a declared python-depends not installed
    # here) is the import check's alone to report.
    assert importlib.util.find_spec("einops") is None
    declared = make_variant(
        tmp_path / "declared",
        "torch-cpu",
        files=loading("import einops\n"),
        metadata={"python-depends": ["einops"]},
    )
    (violation,) = run_checks(declared, CheckOptions()).violations
    assert violation.rule == "import"
    assert "requires Python dependency `einops`" in violation.found


def test_what_only_the_loader_s_own_requirements_require_is_refused(tmp_path: Path) -> None:
    # sigstore, which the loader requires, requires requests today: no release of
    # Torch or of the loader promises it.
    variant = make_variant(tmp_path, "torch-cpu", files=loading("import requests\n"))
    assert found(variant) == {("python-import", "x.py", "requests")}


def test_syntax_error_is_reported(tmp_path: Path) -> None:
    variant = make_variant(tmp_path, "torch-cpu", files={"broken.py": "def f(:\n"})
    assert found(variant) == {("python-syntax", "broken.py", "broken.py")}


# ---------------------------------------------------------------------------
# Optional imports: what runs when the kernel loads, and what does not


LOADS = """
from typing import TYPE_CHECKING

from . import backends
from .sub.deep import leaf
"""
BACKENDS = """\
from typing import TYPE_CHECKING
import numpy

try:
    import jax
except ImportError:
    jax = None
    import cupy

if TYPE_CHECKING:
    import tensorflow


class Backend:
    import paddle

    def to_numpy(self, x):
        import mlx.core

        def inner():
            import oneflow

        return inner


async def later():
    import tinygrad
"""
OPTIONAL_FILES = {
    "__init__.py": INIT + LOADS,
    "backends.py": BACKENDS,
    "sub/__init__.py": "",
    "sub/deep/__init__.py": "import scipy\n",  # loaded: the parent of leaf
    "sub/deep/leaf.py": "from ... import backends\nimport sklearn\n",
    "sub/unused.py": "import torchvision\n",  # nothing imports it
    "layers/__init__.py": "from .. import backends\n",
    "layers/tensorflow.py": "import tensorflow as tf\n\nfrom . import backends\n",
}


def test_load_time_imports_are_violations_and_optional_ones_notes(tmp_path: Path) -> None:
    variant = make_variant(tmp_path, "torch-cpu", files=OPTIONAL_FILES)
    report = run_checks(variant, NO_IMPORT)
    by_severity: dict[str, set[tuple[str, int | None, str]]] = {"error": set(), "note": set()}
    for v in report.violations:
        assert v.rule == "python-import"
        by_severity[v.severity].add((v.file, v.line, v.subject))
    assert by_severity["error"] == {
        ("backends.py", 2, "numpy"),
        ("backends.py", 8, "cupy"),  # the handler runs when the guarded import fails
        ("backends.py", 15, "paddle"),  # a class body runs at load time
        ("sub/deep/__init__.py", 1, "scipy"),
        ("sub/deep/leaf.py", 2, "sklearn"),
    }
    assert by_severity["note"] == {
        ("backends.py", 5, "jax"),
        ("backends.py", 11, "tensorflow"),
        ("backends.py", 18, "mlx.core"),
        ("backends.py", 21, "oneflow"),
        ("backends.py", 27, "tinygrad"),
        ("sub/unused.py", 1, "torchvision"),
        ("layers/tensorflow.py", 1, "tensorflow"),
    }
    assert not report.ok
    lines = report.render().splitlines()
    assert (
        "    note [python-import] line 5: jax: optional dependency, imported in a `try` whose "
        "handler catches ImportError"
    ) in lines
    assert (
        "    note [python-import] line 18: mlx.core: optional dependency, imported inside a "
        "function, so only when the function runs"
    ) in lines
    assert (
        "    note [python-import] line 1: tensorflow: optional dependency, imported by a module "
        "the kernel does not import when it loads"
    ) in lines
    assert lines[-1] == ("FAIL  torch-cpu: 5 violations in 3 files (python-import 5), 7 notes")
    notes = [
        v for f in report.to_json()["files"] for v in f["violations"] if v["severity"] == "note"
    ]
    assert len(notes) == 7


def test_one_package_imported_from_many_files_is_one_violation(tmp_path: Path) -> None:
    """gpt-oss-triton-kernels' torch-cpu variant imports triton at load time from 26
    files: one violation for triton, at its first place, listing the others."""
    files = {"__init__.py": INIT + "from . import a, b\nimport triton\n"}
    files |= {f"{name}.py": "import triton.language as tl\nimport triton\n" for name in "ab"}
    variant = make_variant(tmp_path, "torch-cpu", files=files)
    report = run_checks(variant, NO_IMPORT)
    (violation,) = report.violations
    line = len(INIT.splitlines()) + 2
    assert (violation.file, violation.line, violation.subject) == ("__init__.py", line, "triton")
    assert violation.found.endswith("; also imported at a.py:1, a.py:2, b.py:1, b.py:2")
    assert report.summary().startswith("FAIL  torch-cpu: 1 violation in 1 file")


def test_a_kernel_with_only_optional_imports_passes_with_notes(tmp_path: Path) -> None:
    optional_only = BACKENDS.replace("import numpy\n", "").replace("    import cupy\n", "")
    optional_only = optional_only.replace("    import paddle\n", "")
    files = {"__init__.py": INIT + "from . import backends\n", "backends.py": optional_only}
    variant = make_variant(tmp_path / "build", "torch-cpu", files=files)
    report = run_checks(variant, CheckOptions())  # imported through the real loader too
    assert report.ok, report.render()
    assert {v.severity for v in report.violations} == {"note"}
    assert report.summary() == "ok    torch-cpu: no violations (4 files), 5 notes"
    result = CliRunner().invoke(check, [str(variant), "--no-import", "--json"])
    assert result.exit_code == 0, result.output
    (entry,) = json.loads(result.output)["variants"][0]["files"]
    assert {v["severity"] for v in entry["violations"]} == {"note"}


# ---------------------------------------------------------------------------
# Stable-ABI variants


def test_stable_abi_target_comes_from_the_variant_name(tmp_path: Path, corpus: Corpus) -> None:
    variant = make_variant(
        tmp_path, "torch-stable-abi210-cpu-x86_64-linux", library=corpus.path("torch_shim")
    )
    library = f"{KERNEL_ID}.abi3.so"
    assert found(variant) == {
        ("torch-stable-abi", library, "torch_exception_get_what"),
        ("torch-stable-abi", library, "torch_has_storage"),
    }
    later = CheckOptions(import_check=False, stable_abi=Version.parse("2.14"))
    assert found(variant, later) == set()


# ---------------------------------------------------------------------------
# Discovery


def test_discovery_order(tmp_path: Path) -> None:
    make_variant(tmp_path / "build", "torch-cpu")
    assert discover_variants(tmp_path) == [tmp_path / "build" / "torch-cpu"]
    make_variant(tmp_path / "result", "torch-cuda")
    assert discover_variants(tmp_path) == [tmp_path / "result" / "torch-cuda"]
    assert discover_variants(tmp_path / "build" / "torch-cpu") == [tmp_path / "build" / "torch-cpu"]
    (tmp_path / "result" / "torch213-cxx11-cpu-x86_64-linux").mkdir()  # lacks metadata.json
    (tmp_path / "result" / "notes").mkdir()
    assert [p.name for p in discover_variants(tmp_path)] == [
        "torch-cuda",
        "torch213-cxx11-cpu-x86_64-linux",
    ]


def test_no_variants_is_bad_input(tmp_path: Path) -> None:
    with pytest.raises(UserError) as error:
        check_tree(tmp_path)
    assert "no build variants found" in error.value.render()
    with pytest.raises(UserError) as error:
        check_tree(tmp_path / "missing")
    assert "no such directory" in error.value.render()


# ---------------------------------------------------------------------------
# The command


def test_command_exit_codes_and_output(tmp_path: Path, corpus: Corpus) -> None:
    runner = CliRunner()
    good = make_variant(tmp_path / "good" / "build", library=corpus.path("clean_c"))
    result = runner.invoke(check, [str(good.parent.parent), "--no-import"])
    assert result.exit_code == 0, result.output
    assert result.output.strip().splitlines()[-1].startswith(f"ok    {ARCH}")

    make_variant(tmp_path / "bad" / "build", library=corpus.path("glibc_234"))
    loads_x = {"x.py": "import numpy\n", "__init__.py": INIT + "from . import x\n"}
    make_variant(tmp_path / "bad" / "build", "torch-cpu", files=loads_x)
    result = runner.invoke(check, [str(tmp_path / "bad"), "--no-import"])
    assert result.exit_code == 1
    lines = result.output.strip().splitlines()
    assert lines[-1] == "2 variants checked: 0 ok, 2 failed"
    assert f"  {KERNEL_ID}.abi3.so" in lines
    assert (
        "    [symbol-version] pthread_create@GLIBC_2.34: requires GLIBC 2.34 "
        "(limit: policy kernel: GLIBC <= 2.27)" in lines
    )
    assert any(line.startswith(f"FAIL  {ARCH}: 2 violations in 1 file") for line in lines)

    result = runner.invoke(
        check, [str(tmp_path / "bad"), "--no-import", "--json", "--policy", "manylinux_2_34"]
    )
    assert result.exit_code == 1
    data = json.loads(result.output)
    assert data["ok"] is False
    by_variant = {v["variant"]: v for v in data["variants"]}
    assert by_variant[ARCH]["ok"] is True
    assert by_variant[ARCH]["settings"]["policy"] == "manylinux_2_34"
    (entry,) = by_variant["torch-cpu"]["files"]
    assert entry["file"] == "x.py"
    assert entry["violations"][0] | {"fix": "…"} == {
        "rule": "python-import",
        "severity": "error",
        "subject": "numpy",
        "line": 1,
        "found": "imported when the kernel loads, but it is not in the standard library, "
        f"not required by the cpu builds of Torch {torch_range('cpu')} or by the kernels {LOADER} "
        "loader, and not among the kernel's python-depends",
        "limit": "the standard library, torch, what Torch and the loader require, python-depends",
        "fix": "…",
    }


def test_command_bad_input_exits_2(tmp_path: Path) -> None:
    runner = CliRunner()
    make_variant(tmp_path / "build", "torch-cpu")
    result = runner.invoke(check, [str(tmp_path), "--policy", "manylinux_9"])
    assert result.exit_code == 2
    assert "unknown policy 'manylinux_9'; valid policies: kernel, manylinux_2_5" in result.output
    assert "Traceback" not in result.output
    result = runner.invoke(check, [str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "no such directory" in result.output
    result = runner.invoke(check, [str(tmp_path), "--torch-stable-abi", "two"])
    assert result.exit_code == 2
    assert "invalid version 'two'" in result.output


# ---------------------------------------------------------------------------
# Store paths inside a library


STORE_PATH = "/nix/store/0123456789abcdfghijklmnpqrsvwxyz-torch-env/include/relu.h"


def test_a_store_path_in_a_library_names_the_library_the_path_and_the_section(
    tmp_path: Path,
) -> None:
    source = tmp_path / "where.c"
    # What assert's __FILE__ leaves in code compiled without the path map.
    source.write_text(f'const char *kn_where(void) {{ return "{STORE_PATH}"; }}\n')
    library = tmp_path / f"{KERNEL_ID}.abi3.so"
    subprocess.run(["gcc", "-O2", "-fPIC", "-shared", str(source), "-o", str(library)], check=True)
    variant = make_variant(tmp_path / "build", library=library)
    report = run_checks(variant, NO_IMPORT)
    [violation] = [v for v in report.errors if v.rule == "store-path"]
    assert violation.file == f"{KERNEL_ID}.abi3.so"
    assert violation.subject == STORE_PATH
    assert "in .rodata: a string constant: __FILE__ of an assert" in violation.found
    assert "build the file through the generated CMake project" in violation.fix


def test_a_library_without_store_paths_passes_the_store_path_rule(
    tmp_path: Path, extension: Path
) -> None:
    variant = make_variant(tmp_path / "build", library=extension)
    report = run_checks(variant, NO_IMPORT)
    assert [v for v in report.violations if v.rule == "store-path"] == []


def test_the_loader_may_be_imported_by_a_kernel_with_kernel_depends(tmp_path: Path) -> None:
    """get_kernel_dep comes from `kernels`: allowed where metadata.json has kernel-depends."""
    init = "from kernels import get_kernel_dep\n" + INIT
    depends = {"kernel-depends": [{"repo-id": "org/dep", "version": 1}]}
    with_depends = make_variant(
        tmp_path / "a", "torch-cpu", files={"__init__.py": init}, metadata=depends
    )
    assert not {f for f in found(with_depends) if f[0] == "python-import"}
    without = make_variant(tmp_path / "b", "torch-cpu", files={"__init__.py": init})
    assert ("python-import", "__init__.py", "kernels") in found(without)
