"""Kernels written the way the Hub's kernels are pass the checks (issue #17).

einlite (tests/data/kernels/einlite) is a noarch kernel in the style of
kernels-community's einops, which kernel-builder publishes: framework backends
(numpy, jax, tensorflow, paddle, cupy) imported inside functions, a helper
imported under try/except ImportError, and layers for other frameworks in
submodules the package never imports. It is built through the real build step,
which runs the post-build checks and refuses a variant that fails them, and it
is loaded through the `kernels` loader. None of those frameworks is installed
here except numpy, so a check that wrongly required them would fail the build.
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from fresh_python import run_python
from handmade import plan_here
from paths import TESTS
from wheel_locks import LOADER, LOCK, torch_range

from kernelnix.checks import CheckOptions, run_checks
from kernelnix.compile import BuildError
from kernelnix.compile.local import BUILD_DIR, build_planned

pytestmark = pytest.mark.slow

EINLITE = TESTS / "data" / "kernels" / "einlite"
# (file, module) of every optional import of a framework einlite does not depend on.
OPTIONAL_IMPORTS = {
    ("_backends.py", "array_api_compat"),  # try/except ImportError
    ("_backends.py", "numpy"),  # inside functions, from here on
    ("_backends.py", "cupy"),
    ("_backends.py", "jax"),
    ("_backends.py", "jax.numpy"),
    ("_backends.py", "tensorflow"),
    ("_backends.py", "paddle"),
    ("ops.py", "numpy"),  # under `if typing.TYPE_CHECKING:` and inside asnumpy()
    ("layers/tensorflow.py", "tensorflow"),  # module level of modules never loaded
    ("layers/flax.py", "flax.linen"),
    ("layers/flax.py", "jax.numpy"),
    ("layers/paddle.py", "paddle"),
}
LOAD = """
import importlib
import sys
from pathlib import Path

import numpy
import torch
from kernels import get_local_kernel

kernel = get_local_kernel(Path(sys.argv[1]))
x = torch.arange(24.0).reshape(2, 3, 4)
grouped = kernel.rearrange(x, "a b (c d) -> a (d b) c", d=2)
assert torch.equal(grouped, x.reshape(2, 3, 2, 2).permute(0, 3, 1, 2).reshape(2, 6, 2))
assert torch.equal(kernel.reduce(x, "a b c -> c a", "sum"), x.sum(1).T)
assert isinstance(kernel.asnumpy(x), numpy.ndarray)  # numpy is installed here
assert kernel.rearrange(numpy.ones((2, 3)), "a b -> b a").shape == (3, 2)
layers = importlib.import_module(kernel.__name__ + ".layers.torch")
assert layers.Rearrange("a b c -> a (b c)")(x).shape == (2, 12)
try:
    importlib.import_module(kernel.__name__ + ".layers.tensorflow")
except ImportError as error:
    print("optional:", error)
"""


def source_copy(root: Path) -> Path:
    copy = root / "einlite"
    shutil.copytree(EINLITE, copy, ignore=shutil.ignore_patterns("build", "__pycache__"))
    return copy


@pytest.fixture(scope="module")
def einlite_build(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every variant of einlite this machine builds (the build runs the checks)."""
    copy = source_copy(tmp_path_factory.mktemp("hub-style"))
    built = build_planned(plan_here(copy), copy, jobs=1)
    assert built.built
    return copy / BUILD_DIR


def test_einops_style_kernel_builds_and_passes_with_notes(einlite_build: Path) -> None:
    variants = sorted(p for p in einlite_build.iterdir() if p.name.startswith("torch-"))
    assert [p.name for p in variants] == ["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]
    for variant in variants:
        report = run_checks(variant, CheckOptions())
        assert report.ok, report.render()
        assert {v.severity for v in report.violations} == {"note"}
        assert {(v.file, v.subject) for v in report.violations} == OPTIONAL_IMPORTS
        assert all(v.rule == "python-import" for v in report.violations)
        assert report.summary().endswith(f", {len(report.violations)} notes")


def test_einops_style_kernel_loads_and_computes(einlite_build: Path) -> None:
    output = run_python(LOAD, str(einlite_build))
    assert "optional: No module named 'tensorflow'" in output


def test_module_level_import_of_an_undeclared_package_fails_the_build(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    copy = source_copy(tmp_path)
    ops = copy / "torch-ext" / "einlite" / "ops.py"
    text = ops.read_text()
    ops.write_text(text.replace("import math\n", "import math\n\nimport numpy\n", 1))
    line = text.splitlines().index("import math") + 3
    with pytest.raises(BuildError, match="torch-cpu: the post-build checks failed"):
        build_planned(plan_here(copy), copy, "torch-cpu")
    lines = capsys.readouterr().out.splitlines()
    assert "  ops.py" in lines
    assert (
        f"    [python-import] line {line}: numpy: imported when the kernel loads, but it is not "
        "in the standard library, not required by the cpu builds of Torch "
        f"{torch_range('cpu')} or by the kernels {LOADER} loader, and not among the kernel's "
        "python-depends (limit: the "
        "standard library, torch, what Torch and the loader require, python-depends)"
    ) in lines
    assert any(
        line.startswith("FAIL  torch-cpu: 1 violation in 1 file (python-import 1), ")
        for line in lines
    )
    assert not (copy / BUILD_DIR / "torch-cpu").exists()  # nothing half-written


def with_einops(tmp_path: Path) -> Path:
    """The kernel, declaring einops and importing it when it loads."""
    copy = source_copy(tmp_path)
    toml = copy / "build.toml"
    toml.write_text(
        toml.read_text().replace("[general]\n", '[general]\npython-depends = ["einops"]\n')
    )
    ops = copy / "torch-ext" / "einlite" / "ops.py"
    ops.write_text(ops.read_text().replace("import math\n", "import math\n\nimport einops\n", 1))
    return copy


def build_torch_cpu(kernel: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "kernelnix", "build", "--local", str(kernel), "--variant",
         "torch-cpu", "--no-progress"],
        capture_output=True, text=True, check=False, env={**os.environ, **env},
    )  # fmt: skip


def test_a_python_depends_comes_from_the_wheel_lock(tmp_path: Path) -> None:
    """einops is declared but not installed here: the variant is built and its import
    check run with einops from the wheel lock, as `pip install` of the kernel gives it."""
    copy = with_einops(tmp_path)
    assert importlib.util.find_spec("einops") is None
    done = build_torch_cpu(copy)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "+ python-depends-einops from " in done.stdout
    assert "ok    torch-cpu: no violations" in done.stdout, done.stdout
    assert "[policy kernel (a redistributable build" in done.stdout


def test_a_python_depends_the_lock_lacks_is_one_error(tmp_path: Path) -> None:
    """A lock without python-depends (an older one): one error naming the name, the
    lock and the command that fixes it (exit 2), not a violation per importing file."""
    copy = with_einops(tmp_path)
    lock = json.loads(LOCK.read_text())
    del lock["host"]["python-depends"]
    older = tmp_path / "lock.json"
    older.write_text(json.dumps(lock))
    done = build_torch_cpu(copy, KERNELNIX_WHEEL_LOCK=str(older))
    assert done.returncode == 2, done.stdout + done.stderr
    assert done.stderr.count("error:") == 1, done.stderr
    assert f"python-depends 'einops': the wheel lock {older} holds no wheels of it" in done.stderr
    assert "run `kernelnix lock-wheels`" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (copy / BUILD_DIR / "torch-cpu").exists()
