"""Each variant against its own Torch and CUDA toolkit, from the locked wheels.

examples/fused-scale (CPU + CUDA) with a kernelnix whose wheel lock keeps two
build sets of two Torch releases, `2.13-cpu` (the CUDA wheel of Torch 2.13,
PyPI has no CPU one) and `2.14-cuda-13` (Torch 2.14.1 cu130 with nvcc 13.0
from NVIDIA's wheels): `nix build .#bundle` of the host toolchain, with no host
record and no CUDA toolkit on PATH, builds both, each passes `kernelnix check`
under the policy its build recorded, the CPU variant runs its op in this
machine's CPU Torch 2.13, and the CUDA variant loads through `kernels` in its
own Torch (the environment the build used). `kernelnix build --local` builds
the same from the same wheels. Both are built against the glibc 2.27 target and
pass the publishing policy, and the bundle's closure is the bundle alone. The
whole bundle (nine variants, about 9 GB of wheels) is a `heavy` test, run with
`pytest --heavy`.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from nix_projects import kernelnix_clone, make_project, nix
from paths import EXAMPLE_COPY_IGNORE, EXAMPLES, ROOT

pytestmark = [pytest.mark.slow]

SYSTEM = "x86_64-linux"
BUILD_SETS = ("2.13-cpu", "2.14-cuda-13")
CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch214-cxx11-cu130-x86_64-linux"
FULL_BUNDLE = [
    f"torch{torch}-cxx11-{backend}-x86_64-linux"
    for torch in ("212", "213", "214")
    for backend in ("cpu", "cu130")
]
OUTSIDE_BUNDLE = [
    "torch211-cxx11-cpu-x86_64-linux",
    "torch215-cxx11-cpu-x86_64-linux",
    "torch215-cxx11-cu132-x86_64-linux",
]

# Runs in the variant's Torch: the op of a CPU variant against Torch's own
# arithmetic; of a CUDA variant (no GPU here) its registration.
LOAD = """
import json, sys, torch
from pathlib import Path
from kernels import get_local_kernel
bundle, variant, backend = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
kernel = get_local_kernel(bundle, backend=backend)
namespace = json.loads((bundle / variant / "metadata.json").read_text())["id"]
op = getattr(torch.ops, namespace).scale_add.default
report = {"module": kernel.__name__, "torch": torch.__version__,
          "cuda": torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), "CUDA")}
if backend == "cpu":
    x, y = torch.randn(1000), torch.randn(1000)
    report["matches"] = bool(torch.allclose(kernel.scale_add(x, y, 0.5), x * 0.5 + y))
print(json.dumps(report))
"""


def _no_cuda_toolkit_path() -> str:
    """PATH without a CUDA toolkit: nvcc must come from the wheels."""
    return os.pathsep.join(p for p in os.environ["PATH"].split(os.pathsep) if "cuda" not in p)


@dataclass(frozen=True)
class Bundle:
    project: Path
    env: dict[str, str]
    result: Path


def load(python: str, bundle: Path, variant: str, backend: str, env: dict[str, str]) -> dict:
    done = subprocess.run(
        [python, "-c", LOAD, bundle, variant, backend],
        capture_output=True, text=True, env=env, cwd=bundle.parent, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    report: dict = json.loads(done.stdout.splitlines()[-1])
    return report


def single_variant_bundle(dest: Path, variant: Path) -> Path:
    """A directory whose only variant is `variant`: the loader picks exactly it."""
    dest.mkdir(parents=True)
    (dest / variant.name).symlink_to(variant.resolve())
    return dest


def flake_project(tmp: Path, build_sets: tuple[str, ...]) -> tuple[Path, dict[str, str]]:
    """fused-scale with a generated flake.nix (no host record) against a kernelnix
    whose lock has `build_sets`; the environment for Nix."""
    url, env = kernelnix_clone(tmp, build_sets)
    env["PATH"] = _no_cuda_toolkit_path()
    project = make_project(
        EXAMPLES / "fused-scale", tmp / "fused-scale", url, env, ("--no-host-record",)
    )
    return project, env


def wheel_environment(project: Path, env: dict[str, str], variant: str) -> str:
    """The store path of `variant`'s environment: its Torch and, for CUDA, its toolkit."""
    built = nix(
        project, env, "build", "--no-link", "--json", f".#packages.{SYSTEM}.{variant}.wheelEnv"
    ).stdout
    return str(json.loads(built)[0]["outputs"]["out"])


@pytest.fixture(scope="module")
def bundle(tmp_path_factory: pytest.TempPathFactory) -> Bundle:
    project, env = flake_project(tmp_path_factory.mktemp("locked"), BUILD_SETS)
    nix(project, env, "build", ".#bundle", "--out-link", "result")
    return Bundle(project, env, (project / "result").resolve())


@pytest.fixture(scope="module")
def wheel_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """One KERNELNIX_CACHE for the tests that unpack the wheels outside Nix: each
    unpacked build set takes about 4 to 5 GB, so they are unpacked once, and
    removed when the module ends."""
    cache = tmp_path_factory.mktemp("wheel-cache")
    yield cache
    shutil.rmtree(cache, ignore_errors=True)


def test_the_bundle_holds_a_variant_of_each_locked_torch(bundle: Bundle) -> None:
    variants = sorted(p.name for p in bundle.result.iterdir() if (p / "metadata.json").is_file())
    assert variants == [CPU, CUDA]
    reasons = json.loads(
        nix(bundle.project, bundle.env, "eval", "--json", f".#notOffered.{SYSTEM}").stdout
    )
    # A build set the lock lacks is left out with the lock's reason and the fix.
    assert "torch212-cxx11-cu126-x86_64-linux" in reasons
    assert "is not locked: PyPI serves cu130" in reasons["torch212-cxx11-cu126-x86_64-linux"]
    assert "kernelnix lock-wheels" in reasons["torch212-cxx11-cu126-x86_64-linux"]


def test_each_variant_passes_the_checks_it_was_built_under(bundle: Bundle) -> None:
    for variant in (CPU, CUDA):
        done = subprocess.run(
            ["kernelnix", "check", str(bundle.result / variant)],
            capture_output=True, text=True, env=bundle.env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        assert f"ok    {variant}: no violations" in done.stdout


def test_each_variant_is_publishable_and_the_bundle_refers_to_nothing(bundle: Bundle) -> None:
    """Built against the glibc 2.27 target with a private C++ runtime: the publishing
    policy passes, and no store path of the build (the Torch environment, the
    target) is referred to, so the bundle's closure is the bundle (CPU + CUDA)."""
    for variant in (CPU, CUDA):
        done = subprocess.run(
            ["kernelnix", "check", "--policy", "kernel", "--redistributable",
             str(bundle.result / variant)],
            capture_output=True, text=True, env=bundle.env, check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stdout + done.stderr
        metadata = json.loads((bundle.result / variant / "metadata.json").read_text())
        assert metadata["provenance"]["kernelnix"]["redistributable"] is True
    closure = json.loads(
        nix(bundle.project, bundle.env, "path-info", "--json", "-rS", str(bundle.result)).stdout
    )
    assert sum(entry["narSize"] for entry in closure) < 5 * 2**20, closure
    assert max(entry["closureSize"] for entry in closure) < 5 * 2**20


def test_the_cpu_variant_runs_in_a_cpu_torch_of_its_release(bundle: Bundle, tmp_path: Path) -> None:
    """Built against Torch 2.13's CUDA wheel, loaded in this machine's Torch 2.13 CPU."""
    single = single_variant_bundle(tmp_path / "cpu", bundle.result / CPU)
    report = load(sys.executable, single, CPU, "cpu", bundle.env)
    assert report["torch"].startswith("2.13.") and report["matches"] is True
    metadata = json.loads((bundle.result / CPU / "metadata.json").read_text())
    assert metadata["backend"] == {"type": "cpu"}


def test_the_cuda_variant_loads_in_its_own_torch(bundle: Bundle, tmp_path: Path) -> None:
    environment = wheel_environment(bundle.project, bundle.env, CUDA)
    assert (Path(environment) / "nvidia" / "cu13" / "bin" / "nvcc").is_file()
    single = single_variant_bundle(tmp_path / "cuda", bundle.result / CUDA)
    env = {**bundle.env, "PYTHONPATH": environment}
    report = load(sys.executable, single, CUDA, "cuda", env)
    assert report["torch"] == "2.14.1+cu130" and report["cuda"] is True
    needed = subprocess.run(
        ["readelf", "-d", *(bundle.result / CUDA).glob("*.so")], capture_output=True, text=True
    ).stdout
    assert "libcudart.so.13" in needed and "libc10_cuda.so" in needed


# The CUDA variant compiled a second time (about 190 s on two cores, over CI's
# budget): build --local from locked wheels is in CI through test_kernel_deps.py.
@pytest.mark.heavy
def test_build_local_builds_from_the_same_wheels(
    bundle: Bundle, wheel_cache: Path, tmp_path: Path
) -> None:
    """The same variants without Nix (one arch of the CUDA kernels, to be quick):
    the wheels Nix fetched are not fetched again."""
    project = tmp_path / "fused-scale"
    shutil.copytree(EXAMPLES / "fused-scale", project, ignore=EXAMPLE_COPY_IGNORE)
    env = {**bundle.env, "KERNELNIX_CACHE": str(wheel_cache)}
    done = subprocess.run(
        ["kernelnix", "build", "--local", str(project), "--cuda-archs", "9.0", "--no-progress"],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    output = done.stdout + done.stderr
    assert done.returncode == 0, output
    assert f"built {project / 'build' / CPU}" in output or f"built build/{CPU}" in output
    assert "+ fetch " not in output  # every wheel came from the Nix store
    assert "+ torch 2.14.1+cu130 from" in output and "+ torch 2.13.0+cu130 from" in output
    for variant in (CPU, CUDA):
        assert (project / "build" / variant / "metadata.json").is_file()


def check_and_load(project: Path, env: dict[str, str], built: Path, tmp: Path) -> dict:
    """`kernelnix check` of the variant at `built` under the publishing policy, then
    its load through `kernels` in its own Torch (its wheel environment first on the
    path)."""
    variant = built.name
    done = subprocess.run(
        ["kernelnix", "check", "--policy", "kernel", "--redistributable", str(built)],
        capture_output=True, text=True, env=env, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"ok    {variant}: no violations" in done.stdout
    environment = wheel_environment(project, env, variant)
    backend = "cpu" if "-cpu-" in variant else "cuda"
    single = single_variant_bundle(tmp / variant, built)
    return load(sys.executable, single, variant, backend, {**env, "PYTHONPATH": environment})


@pytest.mark.heavy
def test_the_whole_bundle_and_the_variants_outside_it(tmp_path: Path) -> None:
    """Every variant PyPI's wheels give fused-scale: the six of the bundle, and the
    three outside it by name (about 9 GB of wheels, an hour on two cores). Each
    passes its checks and loads in its own Torch; the CPU ones run their op."""
    everything = ("2.11-cpu", "2.12-cpu", "2.12-cuda-13", "2.13-cpu", "2.13-cuda-13",
                  "2.14-cpu", "2.14-cuda-13", "2.15-cpu", "2.15-cuda-13.2")  # fmt: skip
    project, env = flake_project(tmp_path, everything)
    nix(project, env, "build", ".#bundle", "--out-link", "result")
    built = {p.name: p for p in (project / "result").resolve().iterdir()}
    assert sorted(built) == sorted(FULL_BUNDLE)
    for variant in OUTSIDE_BUNDLE:
        nix(project, env, "build", f".#{variant}", "--out-link", f"result-{variant}")
        built[variant] = (project / f"result-{variant}").resolve() / variant
    for variant, path in sorted(built.items()):
        report = check_and_load(project, env, path, tmp_path / "load")
        release = variant[len("torch") :].split("-")[0]
        assert report["torch"].startswith(f"{release[0]}.{release[1:]}."), (variant, report)
        if "-cpu-" in variant:
            assert report["matches"] is True, (variant, report)
        else:
            cuda = "cu132" if "-cu132-" in variant else "cu130"
            assert report["torch"].endswith(f"+{cuda}"), (variant, report)
            assert report["cuda"] is True, (variant, report)


# Heavy: it makes one Torch environment per variant (about 80 s); the script is for a lent GPU.
@pytest.mark.heavy
def test_gpu_check_runs_the_ops_it_can_here(bundle: Bundle, wheel_cache: Path) -> None:
    """scripts/gpu-check.sh's CPU half: the CPU variant's ops run against Torch in its
    own Torch; the CUDA variant loads in its own, and says its ops need a GPU."""
    done = subprocess.run(
        ["bash", str(ROOT / "scripts" / "gpu-check.sh"), str(bundle.result)],
        capture_output=True, text=True, check=False,
        env={**bundle.env, "KERNELNIX_CACHE": str(wheel_cache)},
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    lines = dict(line.split("  ", 1) for line in done.stdout.splitlines())
    prefix = bundle.result.name
    assert lines[f"{prefix}/{CPU}"].startswith("torch 2.13.0+cu130 on cpu: ok scale_add=")
    assert "sum_squares=" in lines[f"{prefix}/{CPU}"]
    assert lines[f"{prefix}/{CUDA}"] == "torch 2.14.1+cu130 on cuda: loaded; no GPU, ops not run"


def test_a_nix_build_takes_cutlass_from_its_locked_wheel_not_the_build_python(
    tmp_path: Path,
) -> None:
    """cute-scale's CUDA variant (`cutlass_3_8`) in the host toolchain: its
    derivation points KERNELNIX_DEP_CUTLASS_3_8 into the locked nvidia-cutlass
    wheel, whatever the build Python has installed, and lists the wheel."""
    url, env = kernelnix_clone(tmp_path, BUILD_SETS)
    project = make_project(
        EXAMPLES / "cute-scale", tmp_path / "cute-scale", url, env, ("--no-host-record",)
    )
    variant = f"packages.{SYSTEM}.{CUDA}"
    fields = "v: { inherit (v) KERNELNIX_DEP_CUTLASS_3_8 lockedWheels lockedArchives; }"
    evaluated = nix(project, env, "eval", "--json", f".#{variant}", "--apply", fields).stdout
    found = json.loads(evaluated)
    wheel = "nvidia_cutlass-3.8.0.0-py3-none-any"
    assert found["KERNELNIX_DEP_CUTLASS_3_8"].startswith("/nix/store/")
    assert found["KERNELNIX_DEP_CUTLASS_3_8"].endswith(
        f"-wheel-{wheel}/cutlass_library/source/include"
    )
    assert f"{wheel}.whl" in [w["name"] for w in found["lockedWheels"]]
    assert found["lockedArchives"] == []
