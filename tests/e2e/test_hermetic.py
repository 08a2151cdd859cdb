"""The hermetic toolchain (nix/toolchains/hermetic on the registry artifacts of
nix/registry): relu's CPU and CUDA variants built by real Nix with
`sandbox = true`, so that nothing outside the store can be read, held to the
publishing policy, and rebuilt bit for bit: `nix build --rebuild`, and (heavy)
both built again in a second, independent store. The derivations are checked
too: store paths as builders and on PATH, nothing impure. The other kinds of
variant, built the same way and held to the same policy: relu-noarch's
`torch-cpu` (noarch), relu-stable-abi's CPU variant (stable ABI) and
relu-tvm-ffi's CPU and CUDA variants (tvm-ffi: apache-tvm-ffi, no Torch).
cute-scale's CUDA variant, a CuTe kernel, on the headers of the locked
nvidia-cutlass wheel (build.toml's `cutlass_3_8`); a dependency PyPI has no wheel
of (`cutlass_4_0`) from the GitHub release dependencies.json pins.

The first run fetches the locked Torch and CUDA wheels into the store.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from nix_projects import kernelnix_clone, make_project, nix
from nix_remote import serve_directory
from paths import EXAMPLES, ROOT
from release_archives import release_archive, stand_in_release, unpacked_hash

from kernelnix.publish.reproduce import compare_variant, report_lines

# The sandbox on, and no silent fallback to a build without it.
SANDBOX = ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false")
ONE_CORE = ("--cores", "1", "--max-jobs", "1")
BUILD_SETS = ("2.13-cpu", "2.13-cuda-13")
CPU = "torch213-cxx11-cpu-x86_64-linux"
CUDA = "torch213-cxx11-cu130-x86_64-linux"

pytestmark = pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix")


@dataclass(frozen=True)
class Project:
    path: Path
    env: dict[str, str]


HERMETIC = ("--toolchain", "hermetic", "--no-host-record")
# relu-stable-abi's CPU variant (stable ABI 2.12) builds against the newest locked
# CPU Torch, and relu-noarch's `torch-cpu` is import-checked in it (the lock's
# noarch choice for the CPU);
# relu-tvm-ffi's CUDA variant takes the CUDA toolkit of the build set of the Torch
# entry it comes from (2.12, CUDA 13.0), and its CPU variant's tests that entry's
# Torch (2.12, fetched only by the heavy ci-test).
KINDS_BUILD_SETS = ("2.14-cpu", "2.12-cuda-13", "2.12-cpu")
NOARCH = "torch-cpu"
STABLE_ABI = "torch-stable-abi212-cpu-x86_64-linux"
TVM_FFI_CPU = "tvm-ffi01-cpu-x86_64-linux"
TVM_FFI_CUDA = "tvm-ffi01-cu130-x86_64-linux"


@pytest.fixture(scope="module")
def clone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    work = tmp_path_factory.mktemp("hermetic")
    url, env = kernelnix_clone(work, BUILD_SETS)
    return work, url, env


@pytest.fixture(scope="module")
def relu(clone: tuple[Path, str, dict[str, str]]) -> Project:
    work, url, env = clone
    return Project(make_project(EXAMPLES / "relu", work / "relu", url, env, HERMETIC), env)


@pytest.fixture(scope="module")
def cute_scale(clone: tuple[Path, str, dict[str, str]]) -> Project:
    work, url, env = clone
    path = make_project(EXAMPLES / "cute-scale", work / "cute-scale", url, env, HERMETIC)
    return Project(path, env)


@pytest.fixture(scope="module")
def kinds_clone(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str, dict[str, str]]:
    work = tmp_path_factory.mktemp("hermetic-kinds")
    url, env = kernelnix_clone(work, KINDS_BUILD_SETS)
    return work, url, env


@pytest.fixture(scope="module")
def relu_noarch(kinds_clone: tuple[Path, str, dict[str, str]]) -> Project:
    work, url, env = kinds_clone
    example = EXAMPLES / "relu-noarch"
    return Project(make_project(example, work / example.name, url, env, HERMETIC), env)


@pytest.fixture(scope="module")
def relu_stable_abi(kinds_clone: tuple[Path, str, dict[str, str]]) -> Project:
    work, url, env = kinds_clone
    example = EXAMPLES / "relu-stable-abi"
    return Project(make_project(example, work / example.name, url, env, HERMETIC), env)


@pytest.fixture(scope="module")
def relu_tvm_ffi(kinds_clone: tuple[Path, str, dict[str, str]]) -> Project:
    work, url, env = kinds_clone
    example = EXAMPLES / "relu-tvm-ffi"
    return Project(make_project(example, work / example.name, url, env, HERMETIC), env)


def evaluate(project: Project, attribute: str) -> Any:
    return json.loads(nix(project.path, project.env, "eval", "--json", f".#{attribute}").stdout)


def build(project: Project, variant: str, *options: str) -> Path:
    link = project.path / f"result-{variant}"
    nix(
        project.path,
        project.env,
        "build",
        f".#{variant}",
        "-o",
        str(link),
        *SANDBOX,
        *options,
    )
    return link / variant


def test_every_hermetic_nix_file_parses() -> None:
    files = [ROOT / "flake.nix", *ROOT.glob("nix/toolchains/hermetic/*.nix")]
    for path in files:
        done = subprocess.run(
            ["nix-instantiate", "--parse", str(path)], capture_output=True, text=True
        )
        assert done.returncode == 0, f"{path}: {done.stderr}"


def test_offers_the_variants_of_locked_wheels_and_says_why_not_the_others(relu: Project) -> None:
    assert evaluate(relu, "variants") == [CPU, CUDA]
    reasons = evaluate(relu, "notOffered.x86_64-linux")
    assert (
        "the wheel lock has no 2.14-cuda-13 environment for cp311"
        in reasons["torch214-cxx11-cu130-x86_64-linux"]
    )
    assert (
        "torch 2.13.0+cu126 (cp311) is not locked" in reasons["torch213-cxx11-cu126-x86_64-linux"]
    )


def derivations(project: Project, variant: str, system: str = "x86_64-linux") -> dict[str, Any]:
    drv = evaluate(project, f"packages.{system}.{variant}.drvPath")
    shown = nix(project.path, project.env, "show-derivation", "-r", drv).stdout
    return dict(json.loads(shown))


def strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


@pytest.mark.parametrize("variant", [CPU, CUDA])
def test_every_derivation_takes_store_paths_only(relu: Project, variant: str) -> None:
    """The variant and everything it is built from: a store path (or a Nix
    built-in) as builder, nothing impure, no path of this machine's Python or
    /usr; the toolchain's builders get only store paths on PATH."""
    graph = derivations(relu, variant)
    top = next(d for d in graph.values() if d["env"].get("variant") == variant)
    assert top["env"]["toolchainName"] == "hermetic" and top["env"]["redistributable"] == "1"
    assert top["env"]["SOURCE_DATE_EPOCH"]
    assert top["env"]["hermeticPython"].startswith("/nix/store/")
    assert (
        top["env"]["CXX"].startswith("/nix/store/")
        and top["env"]["CUDAHOSTCXX"] == top["env"]["CXX"]
    )
    host_python = str(Path(sys.executable).resolve().parent.parent)
    for path, drv in graph.items():
        assert drv["builder"].startswith(("/nix/store/", "builtin:")), path
        if "hermeticPath" in drv["env"]:  # the toolchain's own (the registry's are its own)
            for entry in drv["env"]["hermeticPath"].split(":"):
                assert entry.startswith("/nix/store/"), (path, entry)
        if "outputHash" not in drv["env"]:  # a download may read proxy settings
            assert not {"__noChroot", "__impure", "impureEnvVars"} & set(drv["env"]), path
        found = [
            s for s in strings(drv) if s.startswith(("/usr", "/bin/", "/lib")) or host_python in s
        ]
        assert not found, (path, found)


# This repository's machines are x86_64: aarch64-linux variants are evaluated, not built.
@pytest.mark.parametrize("variant", [CPU, CUDA])
def test_an_aarch64_variant_evaluates_from_arm64_artifacts_only(
    relu: Project, variant: str
) -> None:
    """Every derivation behind the aarch64-linux variant is for aarch64-linux (a
    Nix built-in fetches), its builder that system's shell, and what it
    downloads is for arm64 or for every system: the lock's arm64 .debs, Torch,
    nvcc and ziglang wheels."""
    arm = variant.replace("x86_64-linux", "aarch64-linux")
    graph = derivations(relu, arm, "aarch64-linux")
    assert {drv["system"] for drv in graph.values()} == {"aarch64-linux", "builtin"}
    urls = [drv["env"]["url"] for drv in graph.values() if "url" in drv["env"]]
    assert not [u for u in urls if "x86_64" in u or "amd64" in u]
    files = [u.rpartition("/")[2] for u in urls]
    wanted = ["torch-2.13.0-cp311-cp311-manylinux_2_28_aarch64.whl", "ziglang-0.17.0-"]
    if "cu130" in variant:
        wanted.append("nvidia_cuda_nvcc-13.0.88-py3-none-manylinux2014_aarch64")
    for prefix in wanted:
        assert [f for f in files if f.startswith(prefix) and "aarch64" in f], prefix
    assert [f for f in files if f.startswith("gcc-12_") and f.endswith("_arm64.deb")]
    shells = {drv["builder"] for drv in graph.values() if not drv["builder"].startswith("builtin:")}
    assert len({s for s in shells if s.endswith("/bin/busybox")}) == 1, shells


def build_and_check(project: Project, variant: str, *check_options: str) -> None:
    """Build `variant` in the sandbox; it says it was built by the hermetic toolchain
    and passes `kernelnix check` with the publishing policy."""
    built = build(project, variant)
    metadata = json.loads((built / "metadata.json").read_text())
    assert metadata["provenance"]["kernelnix"]["toolchain"] == "hermetic"
    check = ["kernelnix", "check", "--policy", "kernel", "--redistributable", *check_options]
    done = subprocess.run([*check, str(built)], capture_output=True, text=True, env=project.env)
    assert done.returncode == 0, done.stdout + done.stderr


def test_cpu_and_cuda_variants_build_in_the_sandbox_and_meet_the_policy(relu: Project) -> None:
    build_and_check(relu, CPU)
    # The host's Torch is CPU-only: the CUDA variant's import was checked in its build.
    build_and_check(relu, CUDA, "--no-import")


def test_a_cutlass_kernel_builds_in_the_sandbox_on_the_locked_wheel_s_headers(
    cute_scale: Project,
) -> None:
    """examples/cute-scale (CuTe, `depends = ["torch", "cutlass_3_8"]`): the sandbox
    has no CUTLASS but the locked nvidia-cutlass wheel's, which the build names."""
    build_and_check(cute_scale, CUDA, "--no-import")
    wheels = evaluate(cute_scale, f"packages.x86_64-linux.{CUDA}.lockedWheels")
    assert "nvidia_cutlass-3.8.0.0-py3-none-any.whl" in [w["name"] for w in wheels]


RELEASE_URL = "https://github.com/NVIDIA/cutlass/archive/refs/tags/v4.0.0.tar.gz"
RELEASE_HASH = "sha256-HJY+Go1viPkSVZPEs/NyMtYJzas4mMLiIZF3kNX+WgA="


def test_a_dependency_without_a_locked_wheel_comes_from_its_pinned_release(
    clone: tuple[Path, str, dict[str, str]], tmp_path: Path
) -> None:
    """cute-scale on `cutlass_4_0`, which PyPI has no wheel of: the variant is offered,
    and its derivation takes the GitHub release dependencies.json pins through a
    fixed-output derivation named `source`, as kernel-builder's fetchFromGitHub
    (evaluating it downloads nothing); its provenance lists the archive."""
    _, url, env = clone
    example = tmp_path / "example"
    shutil.copytree(EXAMPLES / "cute-scale", example)
    toml = example / "build.toml"
    toml.write_text(toml.read_text().replace('"cutlass_3_8"', '"cutlass_4_0"'))
    project = Project(make_project(example, tmp_path / "cute-scale", url, env, HERMETIC), env)
    assert evaluate(project, "variants") == [CUDA]
    assert evaluate(project, f"packages.x86_64-linux.{CUDA}.lockedArchives") == [
        {"name": "cutlass-v4.0.0.tar.gz", "url": RELEASE_URL, "hash": RELEASE_HASH}
    ]
    include = evaluate(project, f"packages.x86_64-linux.{CUDA}.KERNELNIX_DEP_CUTLASS_4_0")
    assert re.fullmatch(r"/nix/store/[a-z0-9]{32}-source/include", include)
    graph = derivations(project, CUDA).values()
    (fetch,) = [d for d in graph if d["env"].get("url") == RELEASE_URL]
    assert fetch["outputs"]["out"]["path"] == include.removesuffix("/include")
    assert fetch["outputs"]["out"]["hashAlgo"] == "r:sha256"
    assert fetch["builder"].startswith("/nix/store/")


def test_a_variant_builds_in_the_sandbox_on_a_release_it_fetches(tmp_path: Path) -> None:
    """A kernelnix whose `cutlass_4_0` pin names an archive served on 127.0.0.1 (a
    stand-in release, `git archive`d as GitHub serves one) and the hash Nix's own
    unpacking gives it: the sandboxed build fetches and unpacks it, and compiles
    against its include directory and tools/util/include."""
    served = tmp_path / "served"
    served.mkdir()
    release_archive(stand_in_release(tmp_path), served / "v4.0.0.tar.gz")
    work = tmp_path / "work"
    url, env = kernelnix_clone(work, ("2.13-cpu",))
    example = tmp_path / "example"
    shutil.copytree(EXAMPLES / "relu", example)
    toml = example / "build.toml"
    cpu = '[kernel.relu_cpu]\nbackend = "cpu"\ndepends = ["torch"'
    toml.write_text(toml.read_text().replace(cpu, cpu + ', "cutlass_4_0"'))
    source = example / "relu_cpu" / "relu_cpu.cpp"
    source.write_text(
        "#include <cutlass/version.h>\n#include <cutlass/util/kernelnix_release.h>\n"
        'static_assert(CUTLASS_MAJOR == 4 && KERNELNIX_FROM_THE_RELEASE, "the release");\n'
        + source.read_text()
    )
    with serve_directory(served) as server:
        archive = f"{server.url}/v4.0.0.tar.gz"
        pin_release(work / "kernelnix", "cutlass_4_0", archive, unpacked_hash(archive))
        server.requests.clear()  # the hash's own download
        project = Project(make_project(example, tmp_path / "relu", url, env, HERMETIC), env)
        build_and_check(project, CPU)
        assert "/v4.0.0.tar.gz" in server.requests
    log = nix(project.path, project.env, "log", f".#{CPU}").stdout
    assert "dependency cutlass_4_0: CUTLASS 4 at /nix/store/" in log
    assert "-source/include (KERNELNIX_DEP_CUTLASS_4_0" in log


def pin_release(checkout: Path, key: str, url: str, tree_hash: str) -> None:
    """The kernelnix clone at `checkout` with `key`'s release pinned to the archive at
    `url` and the hash of its unpacked tree."""
    pins = checkout / "kernelnix" / "data" / "dependencies.json"
    data = json.loads(pins.read_text())
    data["dependencies"][key]["release"].update(url=url, hash=tree_hash)
    pins.write_text(json.dumps(data, indent=1) + "\n")
    subprocess.run(["git", "commit", "-qam", f"{key} pinned to {url}"], cwd=checkout, check=True)


@pytest.mark.parametrize(
    ("example", "variant"), [("relu_noarch", NOARCH), ("relu_stable_abi", STABLE_ABI)]
)
def test_noarch_and_stable_abi_variants_build_in_the_sandbox_and_meet_the_policy(
    request: pytest.FixtureRequest, example: str, variant: str
) -> None:
    """Each build imports its variant through `kernels` in the lock's Torch 2.14 CPU
    environment (the toolchain has no Torch of its own), and the import is checked
    here again, in the host's Torch."""
    project: Project = request.getfixturevalue(example)
    assert variant in evaluate(project, "variants")
    build_and_check(project, variant)
    log = nix(project.path, project.env, "log", f".#{variant}").stdout
    assert f"ok    {variant}: no violations" in log
    assert "import check skipped" not in log


def test_tvm_ffi_variants_build_in_the_sandbox_and_meet_the_policy(relu_tvm_ffi: Project) -> None:
    """Against the locked apache-tvm-ffi wheel, no Torch; the CPU variant's build
    loads it through the `kernels` loader with that wheel (the host's Python has no
    apache-tvm-ffi, so `kernelnix check` here skips the import)."""
    assert evaluate(relu_tvm_ffi, "variants") == [TVM_FFI_CPU, TVM_FFI_CUDA]
    for variant in (TVM_FFI_CPU, TVM_FFI_CUDA):
        build_and_check(relu_tvm_ffi, variant)
    log = nix(relu_tvm_ffi.path, relu_tvm_ffi.env, "log", f".#{TVM_FFI_CPU}").stdout
    assert f"ok    {TVM_FFI_CPU}: no violations" in log
    assert "import check skipped" not in log


def test_a_tvm_ffi_variant_is_tested_with_the_torch_of_its_entry(relu_tvm_ffi: Project) -> None:
    """Its build has no Torch; its kernels_ci tests run on Torch tensors, as
    kernel-builder's do: ci-test puts the 2.12 entry's Torch on PYTHONPATH."""
    drv = evaluate(relu_tvm_ffi, f"ciTests.{TVM_FFI_CPU}.drvPath")
    shown = nix(relu_tvm_ffi.path, relu_tvm_ffi.env, "show-derivation", drv).stdout
    inputs = json.loads(shown)[drv]["inputDrvs"]
    assert [d for d in inputs if d.endswith("-kernelnix-env-2.12-cpu.drv")], inputs


@pytest.mark.heavy
def test_a_tvm_ffi_variant_s_ci_test_passes_in_the_sandbox(relu_tvm_ffi: Project) -> None:
    """Heavy: it fetches and unpacks Torch 2.12 with its CUDA libraries."""
    done = nix(
        relu_tvm_ffi.path, relu_tvm_ffi.env, "run", f".#ciTests.{TVM_FFI_CPU}", *SANDBOX
    ).stdout
    assert re.search(r"\b7 passed", done), done


@pytest.mark.parametrize("variant", [CPU, pytest.param(CUDA, marks=pytest.mark.heavy)])
def test_the_variant_rebuilds_bit_for_bit(relu: Project, variant: str) -> None:
    """Nix builds the variant again and fails unless the output is the same
    (the CUDA one is heavy, over CI's budget)."""
    build(relu, variant)
    build(relu, variant, "--rebuild")


@pytest.fixture
def second_store(tmp_path: Path) -> Iterator[Path]:
    """The root of a chroot store (`--store DIR`): its own database, its own
    build folders; removed afterwards, it grows to several GB."""
    root = tmp_path / "second-store"
    yield root
    shutil.rmtree(root, ignore_errors=True)


def nar_hash(project: Project, path: str, *store: str) -> str:
    info = nix(project.path, project.env, "path-info", "--json", *store, path).stdout
    return str(json.loads(info)[0]["narHash"])


@pytest.mark.heavy
def test_cpu_and_cuda_variants_have_the_same_nar_hash_in_a_second_store(
    relu: Project, second_store: Path
) -> None:
    """Both variants built in /nix/store and again, later, in a second store
    under another root (`--store DIR`), with the same NAR hash.

    Shared between the stores: only the fixed-output downloads, copied with
    `nix copy` (they are checked by hash anyway, and the CUDA wheels are GBs).
    Built independently in the second store: everything else, the registry's
    toolchain (busybox, gcc, binutils, cmake, ninja compiled from source,
    Python, the glibc 2.27 sysroot), the unpacked and patched wheel
    environments, and the variants (each derivation's `building` line is
    checked). About 8 minutes on one core.
    """
    variants = (CPU, CUDA)
    for variant in variants:
        build(relu, variant)
    graph = {drv: info for variant in variants for drv, info in derivations(relu, variant).items()}
    downloads = {drv for drv, info in graph.items() if info["builder"] == "builtin:fetchurl"}
    outputs = [out["path"] for drv in downloads for out in graph[drv]["outputs"].values()]
    where = ("--store", str(second_store))
    nix(relu.path, relu.env, "copy", "--no-check-sigs", "--to", str(second_store), *outputs)
    log = ""
    for variant in variants:
        log += nix(
            relu.path, relu.env, "build", f".#{variant}", "--no-link", *where, *SANDBOX, *ONE_CORE
        ).stderr
        path = evaluate(relu, f"packages.x86_64-linux.{variant}.outPath")
        ours = nar_hash(relu, path, *where)
        print(f"{variant}: {ours}")  # the figure docs/hermetic.md quotes (pytest -s)
        if ours != nar_hash(relu, path):
            second = second_store / path.lstrip("/") / variant
            verdict = compare_variant(variant, second, Path(path) / variant)
            pytest.fail("\n".join(report_lines([verdict])))
    # Nothing but the downloads came from /nix/store: the second store built the rest.
    assert not [drv for drv in graph.keys() - downloads if f"building '{drv}'" not in log]
