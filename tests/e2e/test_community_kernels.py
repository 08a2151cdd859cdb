"""kernels-community's kernels through their own flake.nix, with only the input
URL changed (tests/data/community: the kernels' files as published, without
benchmarks, README, CARD.md and flake.lock; triton-kernels also without its
GPU-only tests). kernel-builder's flakes name no toolchain, so they build the way
a user's do: with kernelnix's default, the hermetic toolchain, in the Nix
sandbox, each variant in its own locked Torch.

A noarch kernel of every backend (einops), a noarch Triton kernel (triton-kernels,
CUDA only), noarch kernels with python-depends (flash-attn4: einops, tvm-ffi and
nvidia-cutlass-dsl from the wheel lock) or load-time imports the python-import
rule judges (liger-kernels: `packaging`, which the loader requires;
trimul-gpumode: `requests`, which nothing guarantees), a CPU kernel with AVX-512
code (quantization-gptq), a multi-backend kernel (relu: CPU, CUDA, ROCm, XPU,
Metal), a CPU + CUDA + XPU kernel (rotary) and a CUDA-only kernel
(causal-conv1d). Each flake locks and evaluates with no `kernelnix generate`;
bundles are built, their compiled variants pass the publishing policy, load
through `kernels` and pass `nix run .#ci-test`, which tests what this GPU-less
machine can run; the dev and test shells start; a flake with no variant for this
machine fails its bundle with each variant's reason. One case keeps the host
toolchain (`?dir=nix/flakes/host`): its own drop-in URL. rotary and causal-conv1d,
whose CUDA sources need the nvcc flags kernel-builder takes from Torch's CMake
config (`--extended-lambda`, `--expt-relaxed-constexpr`), build their cu130
variant with `build --local` against the CUDA Torch (one arch, 9.0, keeps the
compile short) and load.

The kernelnix clone's wheel lock keeps Torch 2.13's CPU build set; a second
clone's keeps its CUDA build set too, so that einops' `torch-cuda` looks for a
device in a CUDA Torch, and relu's CUDA variant is offered (it compiles relu.cu
for every capability of CUDA 13: 20 minutes and more on two shared cores, so its
tests are heavy).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from cuda_venv import CUDA_VARIANT, CudaTorch
from nix_projects import kernel_builder_project, kernelnix_clone, nix
from paths import BUILD_OUTPUTS, TESTS
from terminal import run_on_terminal
from wheel_locks import LOADER

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

COMMUNITY = TESTS / "data" / "community"
# The sandbox on, and no silent fallback to a build without it.
SANDBOX = ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false")
CPU_SETS = ("2.13-cpu",)
CUDA_SETS = ("2.13-cpu", "2.13-cuda-13")
CPU = "torch213-cxx11-cpu-x86_64-linux"
# What `.#backendCi` names: the backends of the variants offered here (the
# compiled ones of the locked CPU build set, noarch ones of every backend).
BACKEND_CI = {
    "causal-conv1d": [],
    "einops": ["cpu", "cuda", "rocm", "xpu"],
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


def community_clone(work: Path, build_sets: tuple[str, ...]) -> Community:
    url, env = kernelnix_clone(work / "kernelnix", build_sets)
    return Community(url, env, work)


def projects(clone: Community) -> Callable[[str], Path]:
    """`make(name)`: the kernel with its flake pointing at `clone`, once per module."""
    made: dict[str, Path] = {}

    def make(name: str) -> Path:
        if name not in made:
            made[name] = kernel_builder_project(
                COMMUNITY / name, clone.root / name, clone.url, host=False
            )
        return made[name]

    return make


@pytest.fixture(scope="module")
def community(tmp_path_factory: pytest.TempPathFactory) -> Community:
    return community_clone(tmp_path_factory.mktemp("community"), CPU_SETS)


@pytest.fixture(scope="module")
def project(community: Community) -> Callable[[str], Path]:
    return projects(community)


@pytest.fixture(scope="module")
def with_cuda(tmp_path_factory: pytest.TempPathFactory) -> Community:
    """A clone whose lock keeps the CUDA build set too."""
    return community_clone(tmp_path_factory.mktemp("with-cuda"), CUDA_SETS)


@pytest.fixture(scope="module")
def cuda_project(with_cuda: Community) -> Callable[[str], Path]:
    return projects(with_cuda)


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


def build_bundle(directory: Path, env: dict[str, str]) -> Path:
    nix(directory, env, "build", ".#bundle", *SANDBOX)
    bundle = (directory / "result").resolve()
    assert sorted(p.name for p in bundle.iterdir()), "an empty bundle"
    return bundle


def assert_publishable(bundle: Path, env: dict[str, str]) -> None:
    """Every compiled variant of `bundle` passes the publishing policy (glibc 2.27, a
    private C++ runtime)."""
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


def assert_loads(bundle: Path, python: str | Path, env: dict[str, str], *modules: str) -> None:
    done = subprocess.run(
        [python, "-c", LOAD, bundle, *modules], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == " ".join(["loaded", *modules])


def assert_passed(output: str) -> None:
    assert re.search(r"\b[0-9]+ passed", output), output
    assert " failed" not in output and " error" not in output, output


@pytest.mark.parametrize(("name", "modules"), [("relu", ["layers"]), ("quantization-gptq", [])])
def test_a_bundle_builds_loads_and_passes_ci_test(
    community: Community, project: Callable[[str], Path], name: str, modules: list[str]
) -> None:
    """The bundle of the CPU variant the lock offers, built in the sandbox, held to
    the publishing policy, loaded through `kernels` in this machine's Torch 2.13,
    and tested by `nix run .#ci-test` in the variant's own locked Torch."""
    directory = project(name)
    bundle = build_bundle(directory, community.env)
    assert [p.name for p in bundle.iterdir() if p.name.startswith("torch")] == [CPU]
    assert_publishable(bundle, community.env)
    assert_loads(bundle, "python3", community.env, *modules)
    done = nix(directory, community.env, "run", ".#ci-test", *SANDBOX)
    if name == "relu":
        assert_passed(done.stdout)
    else:
        # Its tests import `quantization_gptq` and are not marked kernels_ci.
        assert "ci-test: no kernels_ci tests selected" in done.stdout, done.stdout
    script = nix(directory, community.env, "eval", "--raw", ".#ci-test.outPath").stdout
    text = (Path(script) / "bin" / "ci-test").read_text()
    assert "kernelnix-env-2.13-cpu" in text and "KERNELNIX_CI_BACKEND=cpu" in text


# One case of the AVX-512 kernel, selected by the arguments after `--`: about
# 110 s of its tests on two cores.
@pytest.mark.heavy
def test_ci_test_passes_arguments_to_pytest(
    community: Community, project: Callable[[str], Path]
) -> None:
    directory = project("quantization-gptq")
    build_bundle(directory, community.env)
    args = ["-m", "", "-k", "test_gptq[64-1024-2048-1]"]
    done = nix(directory, community.env, "run", ".#ci-test", *SANDBOX, "--", *args)
    assert_passed(done.stdout)


def test_the_host_toolchain_s_url_builds_and_tests_with_this_machine(
    tmp_path: Path, community: Community
) -> None:
    """kernelnix's flake with the host toolchain as default (`?dir=nix/flakes/host`),
    with sandbox = false: relu's CPU variant of this machine's Torch, tested in it."""
    directory = kernel_builder_project(COMMUNITY / "relu", tmp_path / "relu", community.url)
    nix(directory, community.env, "build", ".#bundle")
    done = nix(directory, community.env, "run", ".#ci-test")
    assert_passed(done.stdout)


def test_ci_test_tests_what_this_machine_can_run(
    with_cuda: Community, cuda_project: Callable[[str], Path]
) -> None:
    """einops is noarch for every backend. kernel-builder's order tests its CUDA
    variant first; without a GPU, ci-test looks for each device in the variant's own
    Torch when it runs, says why it moves on, and tests the CPU variant. The CUDA
    variant's own ci-test refuses in one sentence."""
    directory, env = cuda_project("einops"), with_cuda.env
    bundle = build_bundle(directory, env)
    assert sorted(p.name for p in bundle.iterdir()) == [
        "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"
    ]  # fmt: skip
    assert_loads(bundle, "python3", env)
    done = nix(directory, env, "run", ".#ci-test", *SANDBOX)
    assert (
        "ci-test: no CUDA device here (Torch 2.13.0+cu130: Found no NVIDIA driver on your "
        "system); testing torch-rocm"
    ) in done.stdout, done.stdout
    assert "testing torch-cpu" in done.stdout
    assert_passed(done.stdout)
    refused = nix(directory, env, "run", ".#ciTests.torch-cuda", *SANDBOX, check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    (sentence,) = [line for line in refused.stderr.splitlines() if "ci-test:" in line]
    assert sentence.startswith(
        "ci-test: torch-cuda needs a CUDA device, and this machine has none (Torch 2.13.0+cu130:"
    ), sentence
    assert " passed" not in refused.stdout


# The outputs that run on this machine: each must be built from this system's
# derivations, whatever system a noarch variant names.
RUNNABLE = ["ci-test", "ciTests.torch-cpu", "kernels", "build-and-copy", "build-and-upload"]


def test_no_output_builds_another_system_s_derivation(
    with_cuda: Community, cuda_project: Callable[[str], Path]
) -> None:
    """The lock holds aarch64-linux's toolchain too; a noarch variant is in both
    systems' plans. Every derivation in the closures of the runnable outputs and the
    shells of x86_64-linux is x86_64-linux's or Nix's own (fetches)."""
    directory, env = cuda_project("einops"), with_cuda.env
    attributes = [f"packages.x86_64-linux.{name}" for name in RUNNABLE] + [
        "devShells.x86_64-linux.default",
        "devShells.x86_64-linux.test",
    ]
    for attribute in attributes:
        drv = nix(directory, env, "eval", "--raw", f".#{attribute}.drvPath").stdout
        shown = json.loads(nix(directory, env, "show-derivation", "-r", drv).stdout)
        systems = {d["system"] for d in shown.values()}
        assert systems == {"x86_64-linux", "builtin"}, (attribute, systems)
        urls = [d["env"].get("url", "") for d in shown.values()]
        assert not [u for u in urls if "aarch64" in u or "arm64" in u], attribute


def test_the_other_runnable_outputs_work_under_the_default(
    with_cuda: Community, cuda_project: Callable[[str], Path]
) -> None:
    """`kernels`, `build-and-copy` and `build-and-upload` (a dry run) of a noarch
    kernel, in the sandbox: what worked with the host toolchain works here too."""
    directory, env = cuda_project("einops"), with_cuda.env
    done = nix(directory, env, "run", ".#kernels", *SANDBOX, "--", "--help")
    assert "Manage compute kernels" in done.stdout, done.stdout
    done = nix(directory, env, "run", ".#build-and-copy", *SANDBOX)
    assert sorted(p.name for p in (directory / "build").iterdir()) == [
        "torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"
    ]  # fmt: skip
    done = nix(directory, env, "run", ".#build-and-upload", *SANDBOX, "--", "--dry-run")
    assert "dry run: nothing was sent" in done.stdout, done.stdout + done.stderr


def test_the_dev_and_test_shells_have_the_variant_s_torch(
    community: Community, project: Callable[[str], Path], tmp_path: Path
) -> None:
    """`kernelnix devshell` and `testshell` (nix develop, whose builder must be a
    bash: the registry's static bash) on relu's flake: the dev shell has the
    registry's compilers, CMake and `python3` with the variant's locked Torch; the
    test shell has the built variant on PYTHONPATH, and its tests pass there."""
    directory = project("relu")
    build_bundle(directory, community.env)
    env = {**community.env, "NIX_CONFIG": community.env["NIX_CONFIG"] + "\nsandbox = true"}
    show = (
        "python3 -c \"import torch; print('torch', torch.__version__)\"; "
        'echo "cc: $(basename "$CC")"; cmake --version; exit\n'
    )
    code, output = run_on_terminal(["kernelnix", "devshell", str(directory)], show, env, 300)
    assert code == 0, output
    assert "torch 2.13.0+cu130" in output and "cc: gcc" in output, output
    assert "cmake version 4." in output, output
    run_tests = (
        'echo "first: ${PYTHONPATH%%:*}"; '
        "python3 -m pytest -q --color=no -p no:cacheprovider -m kernels_ci tests; exit\n"
    )
    code, output = run_on_terminal(["kernelnix", "testshell", str(directory)], run_tests, env, 300)
    assert code == 0, output
    assert re.search(rf"first: /nix/store/[a-z0-9]{{32}}-relu-{CPU}/{CPU}", output), output
    assert re.search(r"\b2 passed", output), output


def test_the_default_toolchain_is_hermetic(
    community: Community, project: Callable[[str], Path]
) -> None:
    directory = project("relu")
    drv = nix(
        directory, community.env, "eval", "--raw", f".#packages.x86_64-linux.{CPU}.drvPath"
    ).stdout
    shown = json.loads(nix(directory, community.env, "show-derivation", drv).stdout)
    assert next(iter(shown.values()))["env"]["toolchainName"] == "hermetic"


# relu's CUDA variant compiles relu.cu for every default capability of CUDA 13: it
# passed in 34 minutes of a shared two-core machine, beyond CI's budget.
@pytest.mark.heavy
def test_a_cuda_variant_is_published_and_its_tests_need_a_device(
    with_cuda: Community, cuda_project: Callable[[str], Path]
) -> None:
    """relu's CUDA variant built in the sandbox meets the publishing policy (its
    import was checked in its build, in its CUDA Torch). Without a GPU, its own
    ci-test refuses in one sentence; ci-test says why and tests the CPU variant."""
    directory, env = cuda_project("relu"), with_cuda.env
    cuda = "torch213-cxx11-cu130-x86_64-linux"
    bundle = build_bundle(directory, env)
    assert sorted(p.name for p in bundle.iterdir() if p.name.startswith("torch")) == [CPU, cuda]
    assert_publishable(bundle, env)
    refused = nix(directory, env, "run", f".#ciTests.{cuda}", *SANDBOX, check=False)
    assert refused.returncode == 2, refused.stdout + refused.stderr
    assert f"ci-test: {cuda} needs a CUDA device, and this machine has none (" in refused.stderr
    done = nix(directory, env, "run", ".#ci-test", *SANDBOX)
    assert "ci-test: no CUDA device here (Torch 2.13.0+cu130: " in done.stdout, done.stdout
    assert f"; testing {CPU}" in done.stdout
    assert_passed(done.stdout)


def variant_log(directory: Path, env: dict[str, str], name: str) -> str:
    """The build log of the bundle's variant `name`: its checks' verdict."""
    drv = nix(directory, env, "eval", "--raw", f".#packages.x86_64-linux.{name}.drvPath").stdout
    return nix(directory, env, "log", drv).stdout


def test_a_noarch_triton_kernel_builds_and_loads(
    community: Community, project: Callable[[str], Path], cuda_torch: CudaTorch
) -> None:
    """No CUDA Torch locked, no CUDA here: the noarch torch-cuda variant is still
    offered, built (its import check skipped: no Torch to load it with) and loads
    with a CUDA Torch."""
    directory = project("triton-kernels")
    bundle = build_bundle(directory, community.env)
    assert sorted(p.name for p in bundle.iterdir()) == ["torch-cuda"]
    metadata = json.loads((bundle / "torch-cuda" / "metadata.json").read_text())
    assert metadata["backend"]["type"] == "cuda"
    assert_loads(bundle, cuda_torch.python, cuda_torch.env, "matmul_ogs", "routing")


def test_ci_test_of_a_kernel_with_only_device_variants_says_nothing_can_run_here(
    community: Community, project: Callable[[str], Path]
) -> None:
    """triton-kernels is CUDA only, and its torch-cuda has no locked Torch here: the
    CUDA driver itself is asked, and there is none."""
    directory = project("triton-kernels")
    done = nix(directory, community.env, "run", ".#ci-test", *SANDBOX, check=False)
    assert done.returncode == 2, done.stdout + done.stderr
    assert (
        "ci-test: no CUDA device here (no NVIDIA driver (libcuda.so.1) is installed), and "
        "every variant of triton-kernels offered here needs one: nothing to test on this machine"
    ) in done.stderr


def test_python_depends_come_from_the_lock_and_the_variant_loads_in_a_cuda_torch(
    tmp_path: Path,
) -> None:
    """flash-attn4 is noarch CUDA with python-depends einops, tvm-ffi and
    nvidia-cutlass-dsl (whose `cutlass` is importable only through a .pth file).
    With Torch 2.14's CUDA build set locked, its variant's import check loads it
    through `kernels` in that Torch with the python-depends from the lock: none of
    them is installed here. The lock holds two releases of nvidia-cutlass-dsl;
    flash-attn4 uses what the first (4.6.1) removed, so it loads with the second."""
    clone = community_clone(tmp_path, ("2.14-cuda-13",))
    directory = kernel_builder_project(
        COMMUNITY / "flash-attn4", tmp_path / "flash-attn4", clone.url, host=False
    )
    bundle = build_bundle(directory, clone.env)
    assert [p.name for p in bundle.iterdir()] == ["torch-cuda"]
    log = variant_log(directory, clone.env, "torch-cuda")
    assert "redistributable, import]" in log and "ok    torch-cuda: no violations" in log, log
    assert "import check skipped" not in log
    assert "nvidia-cutlass-dsl 4.5.0, after the first python-depends' releases failed" in log
    assert "nvidia-cutlass-dsl 4.6.1)" in log
    variant = ".#packages.x86_64-linux.torch-cuda"
    torch = nix(directory, clone.env, "eval", "--raw", f"{variant}.wheelEnv").stdout
    assert torch.endswith("-kernelnix-env-2.14-cuda-13")
    depends = Path(nix(directory, clone.env, "eval", "--raw", f"{variant}.dependsEnv").stdout)
    assert {"einops", "tvm_ffi", "nvidia_cutlass_dsl"} <= {p.name for p in depends.iterdir()}
    # cutlass is on sys.path through the wheel's .pth file, which the hook runs.
    assert (depends / "sitecustomize.py").is_file() and any(depends.glob("*.pth"))
    others = nix(directory, clone.env, "eval", "--json", f"{variant}.dependsAlternatives").stdout
    (other,) = json.loads(others)
    releases = {p.name for p in Path(other).iterdir() if p.name.endswith(".dist-info")}
    assert "nvidia_cutlass_dsl-4.5.0.dist-info" in releases


def test_a_module_the_loader_requires_loads_and_one_nothing_guarantees_is_refused(
    community: Community, project: Callable[[str], Path]
) -> None:
    """liger-kernels imports `packaging`, which the `kernels` loader requires, when it
    loads; trimul-gpumode imports `requests`, which only a requirement of the loader's
    requirements (sigstore) brings today: one sentence names Torch and the loader."""
    bundle = build_bundle(project("liger-kernels"), community.env)
    assert "torch-cuda" in {p.name for p in bundle.iterdir()}
    directory = project("trimul-gpumode")
    done = nix(directory, community.env, "build", ".#bundle", "-L", *SANDBOX, check=False)
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
    done = nix(directory, community.env, "build", ".#bundle", *SANDBOX, check=False)
    assert done.returncode != 0
    assert "the hermetic toolchain offers no variant of causal-conv1d for the bundle" in done.stderr
    # Each CUDA variant of the plan with why it is not built here: no locked Torch.
    assert (
        f"{CUDA_VARIANT}: the wheel lock has no 2.14-cuda-13 environment for cp311 on x86_64-linux"
    ) in done.stderr, done.stderr
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
