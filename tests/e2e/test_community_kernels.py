"""kernels-community's kernels through their own flake.nix, with only the input
URL changed (tests/data/community: the kernels' files as published, without
benchmarks, README, CARD.md and flake.lock; triton-kernels also without its
GPU-only tests).

A noarch Triton kernel (triton-kernels, CUDA only), noarch kernels with
python-depends (flash-attn4: einops, tvm-ffi and nvidia-cutlass-dsl from the wheel lock)
or load-time imports the python-import rule judges (liger-kernels: `packaging`,
which the loader requires; trimul-gpumode: `requests`, which nothing
guarantees), a CPU kernel with AVX-512
code (quantization-gptq), a multi-backend kernel (relu: CPU, CUDA, ROCm, XPU,
Metal), a CPU + CUDA + XPU kernel (rotary) and a CUDA-only kernel
(causal-conv1d). Each flake locks and evaluates with the host toolchain and no
`kernelnix generate`; every bundle this machine can build is built, its
compiled variants pass the publishing policy, ci-test runs the kernel's own
tests, and a flake with no variant for this machine fails its bundle with each
variant's reason. rotary and causal-conv1d, whose
CUDA sources need the nvcc flags kernel-builder takes from Torch's CMake config
(`--extended-lambda`, `--expt-relaxed-constexpr`), build their cu130 variant
against the CUDA Torch (one arch, 9.0, keeps the compile short) and load.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cuda_venv import CUDA_VARIANT, CudaTorch
from nix_projects import (
    clone_worktree,
    kernel_builder_project,
    kernelnix_clone,
    nix,
    nix_environment,
)
from paths import BUILD_OUTPUTS, TESTS
from wheel_locks import LOADER

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

COMMUNITY = TESTS / "data" / "community"
# What `.#backendCi` names without a host record: CPU variants of this machine's
# Torch, and noarch variants of every backend.
BACKEND_CI = {
    "causal-conv1d": [],
    "quantization-gptq": ["cpu"],
    "relu": ["cpu"],
    "rotary": ["cpu"],
    "triton-kernels": ["cuda"],
}


@dataclass(frozen=True)
class Community:
    url: str
    env: dict[str, str]
    root: Path


@pytest.fixture(scope="module")
def community(tmp_path_factory: pytest.TempPathFactory) -> Community:
    url = clone_worktree(tmp_path_factory.mktemp("kernelnix"))
    env = nix_environment(tmp_path_factory.mktemp("nix") / "registry.json", url)
    return Community(url, env, tmp_path_factory.mktemp("community"))


@pytest.fixture(scope="module")
def project(community: Community) -> Callable[[str], Path]:
    """`project(name)`: the kernel with its flake pointing at kernelnix, once per module."""
    made: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in made:
            made[name] = kernel_builder_project(
                COMMUNITY / name, community.root / name, community.url
            )
        return made[name]

    return make


def test_the_kernels_carry_their_published_flake() -> None:
    for kernel in (p for p in COMMUNITY.iterdir() if p.is_dir()):
        text = (kernel / "flake.nix").read_text()
        assert "kernel-builder.lib.genKernelFlakeOutputs {" in text
        assert not (kernel / "kernelnix-plan.json").exists()


@pytest.mark.parametrize("name", sorted(BACKEND_CI))
def test_locks_and_evaluates(
    community: Community, project: Callable[[str], Path], name: str
) -> None:
    directory = project(name)
    nix(directory, community.env, "flake", "lock")
    lock = json.loads((directory / "flake.lock").read_text())
    assert lock["nodes"]["kernel-builder"]["locked"]["type"] == "git"
    done = nix(
        directory, community.env, "eval", "--json", ".#backendCi", "--apply", "builtins.attrNames"
    )
    assert json.loads(done.stdout) == BACKEND_CI[name]


def build_bundle(community: Community, directory: Path) -> Path:
    nix(directory, community.env, "build", ".#bundle")
    bundle = (directory / "result").resolve()
    assert sorted(p.name for p in bundle.iterdir()), "an empty bundle"
    return bundle


def assert_publishable(bundle: Path, env: dict[str, str]) -> None:
    """Every compiled variant of `bundle` passes the publishing policy (glibc 2.27, a
    private C++ runtime): the host toolchain built it against the glibc target."""
    compiled = [p for p in sorted(bundle.iterdir()) if any(p.glob("*.so"))]
    assert compiled, sorted(bundle.iterdir())
    for variant in compiled:
        done = subprocess.run(
            ["kernelnix", "check", "--policy", "kernel", "--redistributable", "--no-import",
             str(variant)],
            capture_output=True, text=True, env=env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr


# Load the bundle through `kernels`, then import the named submodules of the kernel.
LOAD = """
import importlib, sys
from pathlib import Path
from kernels import get_local_kernel
kernel = get_local_kernel(Path(sys.argv[1]))
for name in sys.argv[2:]:
    importlib.import_module(kernel.__name__ + "." + name)
print("loaded", *sys.argv[2:])
"""


def test_a_noarch_triton_kernel_builds_and_loads(
    community: Community, project: Callable[[str], Path], cuda_torch: CudaTorch
) -> None:
    """No host record, no CUDA here: the noarch torch-cuda variant is still offered,
    built (its import check skipped by the CPU Torch) and loads with a CUDA Torch."""
    directory = project("triton-kernels")
    bundle = build_bundle(community, directory)
    assert sorted(p.name for p in bundle.iterdir()) == ["torch-cuda"]
    metadata = json.loads((bundle / "torch-cuda" / "metadata.json").read_text())
    assert metadata["backend"]["type"] == "cuda"
    done = subprocess.run(
        [cuda_torch.python, "-c", LOAD, bundle, "matmul_ogs", "routing"],
        capture_output=True, text=True, env=cuda_torch.env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "loaded matmul_ogs routing"


@pytest.mark.parametrize(
    ("name", "args"),
    [
        # Its tests import `quantization_gptq` and are not marked kernels_ci: one
        # case, selected by the arguments after `--`, runs the AVX-512 kernel.
        # About 110 s: `pytest --heavy`.
        pytest.param(
            "quantization-gptq",
            ["-m", "", "-k", "test_gptq[64-1024-2048-1]"],
            marks=pytest.mark.heavy,
        ),
        ("relu", []),
    ],
)
def test_ci_test_runs_the_kernels_own_tests(
    community: Community, project: Callable[[str], Path], name: str, args: list[str]
) -> None:
    directory = project(name)
    bundle = build_bundle(community, directory)
    assert_publishable(bundle, community.env)
    done = nix(directory, community.env, "run", ".#ci-test", "--", *args)
    assert " passed" in done.stdout, done.stdout
    assert "failed" not in done.stdout and "error" not in done.stdout, done.stdout


# About 200 s, over CI's budget; a ci-test in a variant's own locked Torch is in CI
# through the hermetic toolchain's (test_kernel_deps.py, test_nix_flake.py's template).
@pytest.mark.heavy
def test_ci_test_runs_a_locked_variant_in_its_own_torch(tmp_path: Path) -> None:
    """relu's tests load it with `kernels.get_kernel` (LOCAL_KERNELS). With Torch
    2.14's CPU build set locked, ci-test picks the torch214 CPU variant and runs
    the tests in its own environment (Torch 2.14.1's CUDA wheel, in which the
    loader is told to ask for the CPU backend), not in this machine's Torch 2.13,
    whose loader finds no variant for it."""
    url, env = kernelnix_clone(tmp_path / "kernelnix", ("2.14-cpu",))
    directory = kernel_builder_project(COMMUNITY / "relu", tmp_path / "relu", url)
    bundle = build_bundle(Community(url, env, tmp_path), directory)
    assert "torch214-cxx11-cpu-x86_64-linux" in {p.name for p in bundle.iterdir()}
    done = nix(directory, env, "run", ".#ci-test")
    assert " passed" in done.stdout, done.stdout
    assert "failed" not in done.stdout and "error" not in done.stdout, done.stdout
    script = nix(directory, env, "eval", "--raw", ".#ci-test.outPath").stdout
    text = (Path(script) / "bin" / "ci-test").read_text()
    assert "kernelnix-env-2.14-cpu" in text and "KERNELNIX_CI_BACKEND=cpu" in text


def variant_log(directory: Path, env: dict[str, str], name: str) -> str:
    """The build log of the bundle's variant `name`: its checks' verdict."""
    drv = nix(directory, env, "eval", "--raw", f".#packages.x86_64-linux.{name}.drvPath").stdout
    return nix(directory, env, "log", drv).stdout


def test_python_depends_come_from_the_lock_and_the_variant_loads_in_a_cuda_torch(
    tmp_path: Path,
) -> None:
    """flash-attn4 is noarch CUDA with python-depends einops, tvm-ffi and
    nvidia-cutlass-dsl (whose `cutlass` is importable only through a .pth file).
    With Torch 2.14's CUDA build set locked, its variant's import check loads it
    through `kernels` in that Torch with the python-depends from the lock: none of
    them is installed here. The lock holds two releases of nvidia-cutlass-dsl;
    flash-attn4 uses what the first (4.6.1) removed, so it loads with the second."""
    url, env = kernelnix_clone(tmp_path / "kernelnix", ("2.14-cuda-13",))
    directory = kernel_builder_project(COMMUNITY / "flash-attn4", tmp_path / "flash-attn4", url)
    bundle = build_bundle(Community(url, env, tmp_path), directory)
    assert [p.name for p in bundle.iterdir()] == ["torch-cuda"]
    log = variant_log(directory, env, "torch-cuda")
    assert "redistributable, import]" in log and "ok    torch-cuda: no violations" in log, log
    assert "import check skipped" not in log
    assert "nvidia-cutlass-dsl 4.5.0, after the first python-depends' releases failed" in log
    assert "nvidia-cutlass-dsl 4.6.1)" in log
    variant = ".#packages.x86_64-linux.torch-cuda"
    torch = nix(directory, env, "eval", "--raw", f"{variant}.wheelEnv").stdout
    assert torch.endswith("-kernelnix-env-2.14-cuda-13")
    depends = Path(nix(directory, env, "eval", "--raw", f"{variant}.dependsEnv").stdout)
    assert {"einops", "tvm_ffi", "nvidia_cutlass_dsl"} <= {p.name for p in depends.iterdir()}
    # cutlass is on sys.path through the wheel's .pth file, which the hook runs.
    assert (depends / "sitecustomize.py").is_file() and any(depends.glob("*.pth"))
    others = nix(directory, env, "eval", "--json", f"{variant}.dependsAlternatives").stdout
    (other,) = json.loads(others)
    releases = {p.name for p in Path(other).iterdir() if p.name.endswith(".dist-info")}
    assert "nvidia_cutlass_dsl-4.5.0.dist-info" in releases


def test_a_module_the_loader_requires_loads_and_one_nothing_guarantees_is_refused(
    community: Community, project: Callable[[str], Path]
) -> None:
    """liger-kernels imports `packaging`, which the `kernels` loader requires, when it
    loads; trimul-gpumode imports `requests`, which only a requirement of the loader's
    requirements (sigstore) brings today: one sentence names Torch and the loader."""
    bundle = build_bundle(community, project("liger-kernels"))
    assert "torch-cuda" in {p.name for p in bundle.iterdir()}
    directory = project("trimul-gpumode")
    done = nix(directory, community.env, "build", ".#bundle", "-L", check=False)
    assert done.returncode != 0
    assert (
        "requests: imported when the kernel loads, but it is not in the standard library, "
        "not required by the cuda builds of Torch"
    ) in done.stderr
    assert f"or by the kernels {LOADER} loader, and not among the kernel's python-depends" in (
        done.stderr
    )


def test_a_flake_with_no_variant_here_fails_its_bundle(
    community: Community, project: Callable[[str], Path]
) -> None:
    directory = project("causal-conv1d")
    done = nix(directory, community.env, "build", ".#bundle", check=False)
    assert done.returncode != 0
    assert "the host toolchain offers no variant of causal-conv1d for the bundle" in done.stderr
    # Each CUDA variant of the plan with why it is not built here (this machine's Torch).
    assert f"{CUDA_VARIANT}: needs " in done.stderr
    assert "torch215-cxx11-cu132-x86_64-linux: needs " in done.stderr
    assert not (directory / "result").exists()


LOAD_CUDA_OPS = """
import json, sys, torch
from pathlib import Path
from kernels import get_local_kernel
kernel = get_local_kernel(Path(sys.argv[1]))
namespace = kernel.__name__
ops = getattr(torch.ops, namespace)
found = {}
for name in sys.argv[2:]:
    op = getattr(ops, name).default
    found[name] = torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CUDA")
print(json.dumps(found))
"""


@pytest.mark.parametrize(
    ("name", "ops"),
    [
        ("rotary", ["apply_rotary"]),
        # About 15 minutes of cold nvcc on two cores: `pytest --heavy`.
        pytest.param(
            "causal-conv1d", ["causal_conv1d_fwd", "causal_conv1d_update"], marks=pytest.mark.heavy
        ),
    ],
)
def test_cuda_kernels_build_against_the_cuda_torch_and_load(
    cuda_torch: CudaTorch, tmp_path: Path, name: str, ops: list[str]
) -> None:
    directory = tmp_path / name
    shutil.copytree(COMMUNITY / name, directory, ignore=BUILD_OUTPUTS)
    done = subprocess.run(
        [cuda_torch.python, "-m", "kernelnix", "build", "--local", str(directory),
         "--variant", CUDA_VARIANT, "--cuda-archs", "9.0", "--no-progress"],
        capture_output=True, text=True, env=cuda_torch.env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    assert f"ok    {CUDA_VARIANT}: no violations" in done.stdout + done.stderr
    # The flags reached every CUDA source (compile_commands.json of the build tree).
    tree = directory / "build" / ".build" / CUDA_VARIANT / "build"
    commands = json.loads((tree / "compile_commands.json").read_text())
    cuda = [entry["command"] for entry in commands if entry["file"].endswith(".cu")]
    assert cuda and all(
        "--expt-extended-lambda" in c and "--expt-relaxed-constexpr" in c for c in cuda
    )
    loaded = subprocess.run(
        [cuda_torch.python, "-c", LOAD_CUDA_OPS, str(directory / "build"), *ops],
        capture_output=True, text=True, env=cuda_torch.env, check=False,
    )  # fmt: skip
    assert loaded.returncode == 0, loaded.stderr
    assert json.loads(loaded.stdout.splitlines()[-1]) == dict.fromkeys(ops, True)
