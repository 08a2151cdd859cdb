"""The hermetic toolchain without nixpkgs: every Nix file parses, and the flake
outputs are evaluated with kernelnix's nixpkgs inputs replaced by the small
stand-ins of tests/fixtures (`nix eval --override-input kernelnix/nixpkgs
path:...`), offline. The derivation graph must have the right shape: each
variant takes its own Torch wheel, its own toolkit and a compiler on glibc
2.27, and nothing of this machine (no /usr, no host Python, no impure
variables). Real builds need nixpkgs and the network: docs/hermetic.md.

The wheel lock (kernelnix/data/wheel-lock.json) is tested too: its Python
side (kernelnix.host.hermetic_wheels) against package indexes made of local files.
"""

from __future__ import annotations

import base64
import hashlib
import io
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from nix_projects import clone_worktree, git, make_project, nix, nix_environment
from paths import EXAMPLES, ROOT, TESTS

from kernelnix.commands.lock import lock_wheels
from kernelnix.host import hermetic_wheels as wheels
from kernelnix.host.system import current_system
from kernelnix.variants.matrix import matrix_data

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

FIXTURES = TESTS / "fixtures"
LOCK = ROOT / "kernelnix" / "data" / "wheel-lock.json"
OVERRIDES = [
    "--override-input",
    "kernelnix/nixpkgs",
    f"path:{FIXTURES / 'nixpkgs'}",
    "--override-input",
    "kernelnix/nixpkgs-glibc-2_27",
    f"path:{FIXTURES / 'nixpkgs-glibc-2_27'}",
]
NOT_VARIANTS = {
    "bundle",
    "default",
    "ciTests",
    "redistributable",
    "backendBundle",
    "ci",
    "backendCi",
    "ci-test",
    "kernels",
    "build-and-copy",
    "build-and-upload",
    "variants",
    "archVariants",
    "pkgs",
}

needs_nix = pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix")


# --- Nix -------------------------------------------------------------------------


@needs_nix
def test_every_hermetic_nix_file_parses() -> None:
    files = [
        ROOT / "flake.nix",
        *ROOT.glob("nix/toolchains/hermetic/*.nix"),
        ROOT / "nix" / "lib" / "variant.nix",
        *FIXTURES.glob("*/*.nix"),
    ]
    for path in files:
        done = subprocess.run(
            ["nix-instantiate", "--parse", str(path)], capture_output=True, text=True
        )
        assert done.returncode == 0, f"{path}: {done.stderr}"
    assert len(files) >= 14


def needed_keys() -> list[dict[str, str]]:
    return [
        {"release": w.release, "system": w.system, "flavor": w.flavor, "python": w.python}
        for w in wheels.needed_torch_wheels()
    ]


def complete_lock() -> dict[str, Any]:
    """The real lock plus a stand-in entry (well-formed, never fetched) for every
    wheel it lacks, so every variant evaluates."""
    lock: dict[str, Any] = json.loads(LOCK.read_text())
    for key in needed_keys():
        by_system = lock["torch"].setdefault(key["release"], {}).setdefault(key["system"], {})
        if key["flavor"] in by_system:
            continue
        arch = key["system"].split("-")[0]
        name = f"torch-{key['release']}%2B{key['flavor']}-{key['python']}-{key['python']}"
        digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).digest()
        by_system[key["flavor"]] = {
            "url": f"https://download.pytorch.org/whl/{key['flavor']}/{name}-manylinux_2_28_{arch}.whl",
            "hash": "sha256-" + base64.b64encode(digest).decode(),
            "python": key["python"],
            "source": "tests/e2e/test_hermetic.py (stand-in)",
        }
    return lock


@dataclass(frozen=True)
class Setup:
    env: dict[str, str]
    real: Path  # a kernel project on kernelnix with the real wheel lock
    complete: Path  # the same on kernelnix with a complete (stand-in) lock
    kernelnix_url: str
    complete_url: str


def hermetic_project(example: Path, dest: Path, kernelnix_url: str, env: dict[str, str]) -> Path:
    options = ("--toolchain", "hermetic", "--no-host-record")
    return make_project(example, dest, kernelnix_url, env, options)


@pytest.fixture(scope="module")
def setup(tmp_path_factory: pytest.TempPathFactory) -> Setup:
    if shutil.which("nix") is None:
        pytest.skip("needs Nix")
    real_url = clone_worktree(tmp_path_factory.mktemp("kernelnix-real"))
    complete_dir = tmp_path_factory.mktemp("kernelnix-complete")
    complete_url = clone_worktree(complete_dir)
    (complete_dir / "kernelnix" / "data" / "wheel-lock.json").write_text(
        json.dumps(complete_lock(), indent=2)
    )
    git(complete_dir, "commit", "-q", "-am", "a complete stand-in wheel lock")
    env = nix_environment(tmp_path_factory.mktemp("nix") / "registry.json", real_url)
    projects = tmp_path_factory.mktemp("projects")
    return Setup(
        env=env,
        real=hermetic_project(EXAMPLES / "relu", projects / "real", real_url, env),
        complete=hermetic_project(EXAMPLES / "relu", projects / "complete", complete_url, env),
        kernelnix_url=real_url,
        complete_url=complete_url,
    )


def evaluate(setup: Setup, project: Path, attribute: str, apply: str | None = None) -> Any:
    args = ["eval", "--json", f".#{attribute}", *OVERRIDES]
    if apply:
        args += ["--apply", apply]
    return json.loads(nix(project, setup.env, *args).stdout)


def closure(setup: Setup, drv: str) -> dict[str, Any]:
    """`nix show-derivation -r`: every derivation the given one depends on."""
    shown: dict[str, Any] = json.loads(
        nix(setup.complete, setup.env, "show-derivation", "-r", drv).stdout
    )
    return shown


def drv_name(path: str) -> str:
    return path.split("-", 1)[1].removesuffix(".drv")


def wheel_of(system: str, variant: dict[str, Any]) -> tuple[str, str, str]:
    """(release, system, flavor) of the Torch wheel a plan variant is built with."""
    data = matrix_data()
    version = variant.get("backend-version")
    build_set = next(
        bs
        for bs in data["build-sets"]
        if bs["torch"] == variant["torch"]
        and bs["backend"] == variant["backend"]
        and system in bs["systems"]
        and (version is None or full_version(version) == full_version(bs.get("version") or ""))
    )
    flavor = wheels.fill(
        data["hermetic"]["torch-wheels"]["flavor"][variant["backend"]],
        build_set.get("version") or "0",
    )
    return data["hermetic"]["torch-releases"][variant["torch"]], system, flavor


def expected_offers(project: Path, lock: dict[str, Any]) -> dict[str, list[str]]:
    """The plan's Linux variants whose backend nixpkgs packages (CPU, CUDA, ROCm)
    and whose Torch wheel `lock` holds."""
    plan = json.loads((project / "kernelnix-plan.json").read_text())
    offered: dict[str, list[str]] = {}
    for system, entries in plan["variants"].items():
        offered[system] = [
            name
            for name in plan["systems"][system]["variants"]
            if system.endswith("-linux")
            and entries[name]["backend"] in ("cpu", "cuda", "rocm")
            and entries[name]["kind"] != "tvm-ffi"
            and locked(lock, *wheel_of(system, entries[name]))
        ]
    return offered


def locked(lock: dict[str, Any], release: str, system: str, flavor: str) -> bool:
    entry = lock["torch"].get(release, {}).get(system, {}).get(flavor)
    return entry is not None and entry.get("hash") is not None


def test_listing_variants_fetches_nothing(setup: Setup) -> None:
    # No override: kernelnix's locked nixpkgs cannot be fetched here, so this
    # passes only because listing the variants never evaluates it.
    done = nix(setup.real, setup.env, "eval", "--json", ".#variants")
    real = json.loads(LOCK.read_text())
    assert json.loads(done.stdout) == expected_offers(setup.real, real)[current_system()]
    assert "download" not in done.stderr and "fetching" not in done.stderr


def variant_drvs(setup: Setup, system: str) -> dict[str, str]:
    drvs: dict[str, str] = evaluate(
        setup,
        setup.complete,
        f"packages.{system}",
        "ps: builtins.mapAttrs (n: v: v.drvPath) (builtins.removeAttrs ps "
        + "[ "
        + " ".join(f'"{n}"' for n in sorted(NOT_VARIANTS))
        + " ])",
    )
    return drvs


def full_version(version: str) -> str:
    """The plan drops trailing zeros ("13"); the matrix and nixpkgs do not ("13.0")."""
    return version if "." in version else f"{version}.0"


def host_strings() -> list[str]:
    """Paths of this machine's Python that must not reach a hermetic build."""
    found = {sys.executable, os.path.realpath(sys.executable)}
    python3 = shutil.which("python3")
    if python3:
        found |= {python3, os.path.realpath(python3)}
    return sorted(p for p in found if not p.startswith("/nix/store/"))


def all_strings(drv: dict[str, Any]) -> Iterator[str]:
    yield drv["builder"]
    yield from drv["args"]
    yield from drv["env"].values()


@pytest.mark.parametrize("system", ["x86_64-linux", "aarch64-linux"])
def test_each_variant_takes_its_own_torch_toolkit_and_glibc_2_27(setup: Setup, system: str) -> None:
    drvs = variant_drvs(setup, system)
    assert sorted(drvs) == sorted(expected_offers(setup.complete, complete_lock())[system])
    lock = complete_lock()
    plan = json.loads((setup.complete / "kernelnix-plan.json").read_text())
    cuda_versions = {"12.6", "13.0", "13.2"}
    for name, drv in drvs.items():
        variant = plan["variants"][system][name]
        graph = closure(setup, drv)
        top = graph[drv]
        names = [drv_name(path) for path in graph]

        # Its own Torch: the one wheel of its release and flavor, from the lock.
        release = {
            "2.11": "2.11.0",
            "2.12": "2.12.0",
            "2.13": "2.13.0",
            "2.14": "2.14.1",
            "2.15": "2.15.0",
        }[variant["torch"]]
        version = full_version(variant["backend-version"] or "0")
        template = {"cpu": "cpu", "cuda": "cu{major}{minor}", "rocm": "rocm{major}.{minor}"}
        flavor = wheels.fill(template[variant["backend"]], version)
        fetches = [d for d in graph.values() if d["env"].get("url", "").endswith(".whl")]
        torch_urls = [d["env"]["url"] for d in fetches if "/torch-" in d["env"]["url"]]
        assert torch_urls == [lock["torch"][release][system][flavor]["url"]], name

        # Its own toolkit, and no other version of it.
        if variant["backend"] == "cuda":
            assert f"cuda-merged-{version}" in names, name
            others = cuda_versions - {version}
            assert not [n for n in names if any(n.endswith(f"-{o}") for o in others)], name
            assert top["env"]["CUDAToolkit_ROOT"].endswith(f"-cuda-merged-{version}")
            # Torch finds the driver through the driver runpath (libcuda.so.1).
            assert "auto-add-driver-runpath-hook" in names, name
            assert top["env"]["CUDAHOSTCXX"] == top["env"]["CXX"]  # nvcc's host: glibc 2.27
        elif variant["backend"] == "rocm":
            assert any(n.startswith(f"clr-{version}.") for n in names), name
            # The HIP compiler: ROCm's clang on glibc 2.27 with the rebuilt gcc's
            # libstdc++; the headers ATen's HIP headers include.
            hip_out = top["env"]["HIPCXX"].removesuffix("/bin/clang++")
            hip_drv = next(p for p, d in graph.items() if d["outputs"]["out"]["path"] == hip_out)
            hip_names = [drv_name(p) for p in closure(setup, hip_drv)]
            assert "glibc-2.27" in hip_names and "glibc-2.42" not in hip_names, hip_names
            assert any(n.startswith("rocm-llvm-clang-unwrapped-") for n in hip_names)
            includes = top["env"]["KERNELNIX_HIP_INCLUDE"].split(";")
            headers = ("rocprim", "hipcub", "rocthrust", "rocwmma", "hipsparselt")
            assert [drv_name(p.removesuffix("/include")).rsplit("-", 1)[0] for p in includes] == [
                *headers
            ], includes
        else:
            assert not [n for n in names if n.startswith(("cuda", "clr-"))], name
        if variant["backend"] != "cuda":
            assert "auto-add-driver-runpath-hook" not in names, name

        # The compiler: a wrapper whose C library is glibc 2.27, around a gcc
        # compiled again on it; the newer glibc of nixpkgs is not in its closure.
        cc_out = top["env"]["CC"].removesuffix("/bin/cc")
        cc_drv = next(p for p, d in graph.items() if d["outputs"]["out"]["path"] == cc_out)
        cc_names = [drv_name(p) for p in closure(setup, cc_drv)]
        assert "glibc-2.27" in cc_names and "glibc-2.42" not in cc_names, cc_names
        assert cc_names.count(drv_name(cc_drv).replace("gcc-wrapper", "gcc")) == 2, cc_names
        rebuilt = [d for d in closure(setup, cc_drv).values() if "built-with" in d["env"]]
        assert len(rebuilt) == 1 and "--with-pic" in rebuilt[0]["env"]["configureFlags"], name
        assert top["env"]["CXX"] == f"{cc_out}/bin/c++"
        # The C++ runtime's link is the CMake project's (--redistributable).
        assert "LDFLAGS" not in top["env"]

        # Nothing of this machine, nothing impure; redistributable.
        for value in (s for d in graph.values() for s in all_strings(d)):
            assert "/usr/" not in value and not value.startswith("/bin/"), (name, value)
            for host in host_strings():
                assert host not in value, (name, host)
        # Substitutable and distributable: remote builders and binary caches take it.
        for key in (
            "__noChroot",
            "__impure",
            "impureEnvVars",
            "allowSubstitutes",
            "preferLocalBuild",
        ):
            assert key not in top["env"], (name, key)
        assert top["builder"].startswith("/nix/store/") and top["builder"].endswith("/bin/bash")
        for entry in top["env"]["PATH"].split(":"):
            assert entry.startswith("/nix/store/"), (name, entry)
        assert top["env"]["KERNELNIX_PYTHON"].startswith("/nix/store/")
        assert top["env"]["toolchainName"] == "hermetic"
        assert top["env"]["redistributable"] == "1"


def test_the_build_step_runs_nix_packaged_kernelnix_with_the_default_policy(
    setup: Setup,
) -> None:
    name = "torch213-cxx11-cu130-x86_64-linux"
    drv = variant_drvs(setup, "x86_64-linux")[name]
    graph = closure(setup, drv)
    top = graph[drv]
    # The shared builder: the same script as the host toolchain's, which passes
    # --redistributable when the toolchain is redistributable.
    script = Path(top["args"][0])
    assert script.name.endswith("build-variant.sh")
    assert "--redistributable" in script.read_text()
    # kernelnix is a Python application built from pyproject.toml, with its
    # (unconditional) dependencies from there, in the Python the build runs.
    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text())
    app = next(
        d for p, d in graph.items() if drv_name(p) == f"kernelnix-{pyproject['project']['version']}"
    )
    wanted = [
        re.match(r"[A-Za-z0-9._-]+", r)[0].lower().replace("_", "-")  # type: ignore[index]
        for r in pyproject["project"]["dependencies"]
        if ";" not in r
    ]
    deps = app["env"]["dependencies"].split()
    assert [drv_name(Path(d).name + ".drv").removeprefix("python3.13-") for d in deps] == wanted
    python_env = next(d for p, d in graph.items() if drv_name(p).endswith("-env"))
    assert app["outputs"]["out"]["path"] in python_env["env"]["packages"].split()
    assert "kernels-0.17.2" in [drv_name(p) for p in graph]


def test_a_variant_without_a_locked_wheel_is_not_offered_and_says_why(setup: Setup) -> None:
    """Only the wheels PyPI serves (CUDA 13.0 and 13.2 builds) can be locked from here;
    the other variants are left out with the reason, and every offered one evaluates."""
    reasons = evaluate(setup, setup.real, f"notOffered.{current_system()}")
    cu126 = reasons["torch213-cxx11-cu126-x86_64-linux"]
    assert "wheel-lock.json has no hash for the Torch 2.13.0 wheel for cu126" in cu126
    assert "kernelnix lock-wheels" in cu126
    assert "torch213-cxx11-cu130-x86_64-linux" not in reasons
    offered = evaluate(setup, setup.real, "variants")
    assert offered and not set(offered) & set(reasons)
    plan = json.loads((setup.real / "kernelnix-plan.json").read_text())
    assert sorted([*offered, *reasons]) == sorted(plan["systems"][current_system()]["variants"])
    xpu = [reason for name, reason in reasons.items() if "-xpu" in name]
    assert xpu and all("nixpkgs has no Intel oneAPI DPC++ toolkit" in r for r in xpu)
    for name in offered:
        path = f".#packages.{current_system()}.{name}.drvPath"
        assert nix(setup.real, setup.env, "eval", "--raw", path, *OVERRIDES).stdout.endswith(".drv")


def test_a_toolkit_version_nixpkgs_lacks_is_explained(setup: Setup) -> None:
    # The kernel flake's `overlays` reach nixpkgs: one that replaces ROCm 7.1 by 7.2.
    flake = setup.complete / "flake.nix"
    text = flake.read_text()
    flake.write_text(
        text.replace(
            "nixpkgs = inputs.nixpkgs or null;",
            "nixpkgs = inputs.nixpkgs or null;\n"
            "      overlays = [ (final: prev: { rocmPackages_7_1 = prev.rocmPackages; }) ];",
        )
    )
    try:
        args = [".#packages.x86_64-linux.torch213-cxx11-rocm71-x86_64-linux.drvPath"]
        done = nix(setup.complete, setup.env, "eval", "--raw", *args, *OVERRIDES, check=False)
    finally:
        flake.write_text(text)
    assert done.returncode != 0
    assert "torch213-rocm71 needs rocm 7.1, and nixpkgs' rocmPackages_7_1 is 7.2.1" in done.stderr
    assert "overlays" in done.stderr


def test_each_variant_has_its_package_set(setup: Setup) -> None:
    """kernel-builder's `pkgs.<variant>`: nixpkgs with the variant's own Torch and Python."""
    system = "x86_64-linux"
    torches = evaluate(
        setup,
        setup.complete,
        f"packages.{system}.pkgs",
        "ps: builtins.mapAttrs (n: p: p.torch.drvPath) ps",
    )
    drvs = variant_drvs(setup, system)
    assert sorted(torches) == sorted(drvs)
    for name in drvs:
        given = evaluate(setup, setup.complete, f"packages.{system}.{name}.hermetic.torch.drvPath")
        assert torches[name] == given, name
    python = evaluate(
        setup,
        setup.complete,
        f"packages.{system}.pkgs",
        "ps: builtins.mapAttrs (n: p: p.python3.drvPath) ps",
    )
    assert len(set(python.values())) > 1  # Python environments per build set


def test_bundle_and_scripts_are_built_with_nixpkgs_tools(setup: Setup) -> None:
    drvs = evaluate(
        setup,
        setup.complete,
        "packages.x86_64-linux",
        "ps: { bundle = ps.bundle.drvPath; ci = ps.ci-test.drvPath; "
        "copy = ps.build-and-copy.drvPath; }",
    )
    for drv in drvs.values():
        top = closure(setup, drv)[drv]
        assert top["builder"].startswith("/nix/store/"), top["builder"]
        assert top["env"]["PATH"].startswith("/nix/store/"), top["env"]["PATH"]
    bundle = closure(setup, drvs["bundle"])[drvs["bundle"]]
    plan = json.loads((setup.complete / "kernelnix-plan.json").read_text())
    offered = expected_offers(setup.complete, complete_lock())["x86_64-linux"]
    bundled = [v for v in plan["systems"]["x86_64-linux"]["bundle"] if v in offered]
    assert len(bundle["env"]["variants"].split()) == len(bundled) > 0
    ci = closure(setup, drvs["ci"])[drvs["ci"]]
    # ci-test runs pytest with the variant's Python (Torch, kernelnix, kernels, pytest).
    assert re.search(r"KERNELNIX_PYTHON='/nix/store/[^']+-env/bin/python3'", ci["env"]["text"])


def test_kernelnix_flake_takes_a_replaced_nixpkgs(setup: Setup, tmp_path: Path) -> None:
    fixture = [
        "--override-input",
        "nixpkgs",
        f"path:{FIXTURES / 'nixpkgs'}",
        "--override-input",
        "nixpkgs-glibc-2_27",
        f"path:{FIXTURES / 'nixpkgs-glibc-2_27'}",
    ]
    entry = f"{setup.kernelnix_url}#legacyPackages.x86_64-linux.hermetic.torch213-cu130"
    done = nix(tmp_path, setup.env, "eval", "--json", f"{entry}.torch.wheelUrl", *fixture)
    lock = json.loads(LOCK.read_text())
    assert json.loads(done.stdout) == lock["torch"]["2.13.0"]["x86_64-linux"]["cu130"]["url"]
    glibc = nix(tmp_path, setup.env, "eval", "--raw", f"{entry}.glibc.version", *fixture)
    assert glibc.stdout == "2.27"


def test_nix_and_python_name_the_same_wheels(setup: Setup, tmp_path: Path) -> None:
    done = nix(tmp_path, setup.env, "eval", "--json", f"{setup.kernelnix_url}#lib.hermeticWheels")
    assert json.loads(done.stdout) == needed_keys()


@needs_nix
def test_binary_cache_is_declared_in_nix_config() -> None:
    done = subprocess.run(
        [
            "nix-instantiate",
            "--eval",
            "--strict",
            "--json",
            "-E",
            f"(import {ROOT}/flake.nix).nixConfig",
        ],
        capture_output=True,
        text=True,
        check=True,
    )
    config = json.loads(done.stdout)
    cache = matrix_data()["hermetic"]["binary-cache"]
    assert config == {
        "extra-substituters": cache["substituters"],
        "extra-trusted-public-keys": cache["trusted-public-keys"],
    }
    docs = (ROOT / "docs" / "hermetic.md").read_text()
    for value in [*config["extra-substituters"], *config["extra-trusted-public-keys"]]:
        assert value in docs
    assert "trusted-users" in docs and "accept-flake-config" in docs


# --- the wheel lock (Python) ---------------------------------------------------


def test_lock_file_entries_are_well_formed() -> None:
    lock = json.loads(LOCK.read_text())
    needed = {(k["release"], k["system"], k["flavor"]) for k in needed_keys()}
    for release, systems in lock["torch"].items():
        for system, flavors in systems.items():
            for flavor, entry in flavors.items():
                assert (release, system, flavor) in needed
                assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", entry["hash"])
                assert entry["url"].startswith("https://") and entry["python"] == "cp313"
    assert lock["python"]["kernels"]["0.17.2"]["x86_64-linux"]["dependencies"]


def test_fill_and_needed_wheels() -> None:
    assert wheels.fill("cu{major}{minor}", "12.6") == "cu126"
    assert wheels.fill("cu{major}{minor}", "13.0") == "cu130"
    assert wheels.fill("rocm{major}.{minor}", "7.1") == "rocm7.1"
    assert wheels.fill("xpuPackages_{major}_{minor}_{patch}", "2025.3.2") == "xpuPackages_2025_3_2"
    assert wheels.fill("p_{patch}", "7") == "p_0"
    keys = wheels.needed_torch_wheels()
    assert len(keys) == len(set(keys))
    assert wheels.TorchWheel("2.13.0", "x86_64-linux", "cu126", "cp313") in keys
    assert not [k for k in keys if k.system == "aarch64-darwin"]


def make_wheel(path: Path, files: dict[str, str]) -> str:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, text in files.items():
            archive.writestr(name, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(buffer.getvalue())
    return hashlib.sha256(buffer.getvalue()).hexdigest()


def index_page(directory: Path, links: list[str]) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    anchors = "\n".join(
        f'<a href="{href}">{href.split("#")[0].split("/")[-1]}</a>' for href in links
    )
    (directory / "index.html").write_text(f"<html><body>\n{anchors}\n</body></html>\n")


TINY_MATRIX: dict[str, Any] = {
    "build-sets": [
        {"torch": "2.13", "backend": "cpu", "systems": ["x86_64-linux"]},
        {"torch": "2.13", "backend": "cuda", "version": "12.6", "systems": ["x86_64-linux"]},
        {"torch": "2.13", "backend": "cuda", "version": "13.0", "systems": ["x86_64-linux"]},
        {"torch": "2.13", "backend": "metal", "systems": ["aarch64-darwin"]},
    ],
    "hermetic": {
        "systems": ["x86_64-linux"],
        "python": {"wheel-tag": "cp313"},
        "torch-releases": {"2.13": "2.13.0"},
        "torch-wheels": {
            "flavor": {"cpu": "cpu", "cuda": "cu{major}{minor}"},
            "indexes": [],
            "platforms": {"x86_64-linux": "x86_64"},
        },
        "python-wheels": {"kernels": "0.17.2"},
    },
}


@pytest.fixture
def indexes(tmp_path: Path) -> dict[str, str]:
    """download.pytorch.org and PyPI as local files (file:// URLs)."""
    wheels.read_index.cache_clear()
    wheels.torch_build_version.cache_clear()
    root = tmp_path / "index"
    version = "__version__ = '{}'\n"
    # download.pytorch.org: a cu126 wheel (hash published) and one for another Python.
    cu126 = "torch-2.13.0%2Bcu126-cp313-cp313-manylinux_2_28_x86_64.whl"
    sha = make_wheel(root / "files" / cu126.replace("%2B", "+"), {"torch/version.py": ""})
    index_page(
        root / "whl" / "cu126" / "torch",
        [
            f"../../../files/{cu126}#sha256={sha}",
            "../../../files/torch-2.13.0%2Bcu126-cp312-cp312-manylinux_2_28_x86_64.whl#sha256=00",
        ],
    )
    # PyPI: untagged wheels; only torch/version.py says which build they are.
    make_wheel(
        root / "pypi-files" / "torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl",
        {"torch/version.py": version.format("2.13.0+cu130")},
    )
    make_wheel(
        root / "pypi-files" / "torch-2.13.0-cp313-cp313-musllinux_1_2_x86_64.whl",
        {"torch/version.py": version.format("2.13.0+cpu")},
    )
    index_page(
        root / "pypi" / "torch",
        [
            "../../pypi-files/torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl",
            "../../pypi-files/torch-2.13.0-cp313-cp313-musllinux_1_2_x86_64.whl",
        ],
    )
    metadata = (
        "Name: kernels\nVersion: 0.17.2\nRequires-Dist: huggingface_hub>=0.26\n"
        "Requires-Dist: PyYAML>=6\nRequires-Dist: tomli; python_version < '3.11'\n"
    )
    kernels = "kernels-0.17.2-cp38-abi3-manylinux_2_17_x86_64.manylinux2014_x86_64.whl"
    make_wheel(root / "pypi-files" / kernels, {"kernels-0.17.2.dist-info/METADATA": metadata})
    index_page(root / "pypi" / "kernels", [f"../../pypi-files/{kernels}"])
    base = root.as_uri()
    return {
        "pytorch": base + "/whl/{flavor}/torch/index.html",
        "pypi-torch": base + "/pypi/torch/index.html",
        "pypi": base + "/pypi/{name}/index.html",
    }


def test_lock_finds_tagged_and_verified_untagged_wheels(
    tmp_path: Path, indexes: dict[str, str]
) -> None:
    lock_path = tmp_path / "lock.json"
    result = wheels.lock(
        path=lock_path,
        indexes=[indexes["pytorch"], indexes["pypi-torch"]],
        pypi=indexes["pypi"],
        matrix=TINY_MATRIX,
        log=lambda line: None,
    )
    assert result.missing == ["torch 2.13.0 cpu cp313 x86_64-linux"]
    lock = json.loads(lock_path.read_text())
    torch = lock["torch"]["2.13.0"]["x86_64-linux"]
    assert set(torch) == {"cu126", "cu130"}
    cu126 = tmp_path / "index/files/torch-2.13.0+cu126-cp313-cp313-manylinux_2_28_x86_64.whl"
    assert torch["cu126"]["hash"] == wheels.sri(hashlib.sha256(cu126.read_bytes()).hexdigest())
    assert torch["cu126"]["url"].endswith(
        "torch-2.13.0%2Bcu126-cp313-cp313-manylinux_2_28_x86_64.whl"
    )
    # No hash in the index: the file is hashed; the build is checked (cu130, not cpu).
    cu130 = tmp_path / "index/pypi-files/torch-2.13.0-cp313-cp313-manylinux_2_28_x86_64.whl"
    assert torch["cu130"]["hash"] == wheels.sri(hashlib.sha256(cu130.read_bytes()).hexdigest())
    assert "torch/version.py: 2.13.0+cu130" in torch["cu130"]["source"]
    kernels = lock["python"]["kernels"]["0.17.2"]["x86_64-linux"]
    assert kernels["dependencies"] == ["huggingface-hub", "pyyaml"]
    assert kernels["url"].endswith("manylinux2014_x86_64.whl")


def test_lock_keeps_locked_wheels_and_drops_unneeded_ones(
    tmp_path: Path, indexes: dict[str, str]
) -> None:
    lock_path = tmp_path / "lock.json"
    args: dict[str, Any] = {"matrix": TINY_MATRIX, "log": lambda line: None}
    wheels.lock(
        path=lock_path,
        indexes=[indexes["pytorch"], indexes["pypi-torch"]],
        pypi=indexes["pypi"],
        **args,
    )
    first = json.loads(lock_path.read_text())
    first["torch"]["2.12.0"] = {
        "x86_64-linux": {"cpu": {"url": "x", "hash": "y", "python": "cp313"}}
    }
    lock_path.write_text(json.dumps(first))
    # Nothing reachable now: what was locked is kept, the stale entry dropped.
    gone = "file:///nonexistent/{flavor}/"
    result = wheels.lock(path=lock_path, indexes=[gone], pypi="file:///nonexistent/{name}/", **args)
    again = json.loads(lock_path.read_text())
    assert again["torch"] == {"2.13.0": first["torch"]["2.13.0"]}
    assert sorted(result.kept) == sorted(
        [
            "torch 2.13.0 cu126 cp313 x86_64-linux",
            "torch 2.13.0 cu130 cp313 x86_64-linux",
            "kernels 0.17.2 x86_64-linux",
        ]
    )
    assert result.missing == ["torch 2.13.0 cpu cp313 x86_64-linux"]


def test_lock_wheels_command_reports_what_it_cannot_find(
    tmp_path: Path, indexes: dict[str, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(wheels, "matrix_data", lambda: TINY_MATRIX)
    lock_path = tmp_path / "lock.json"
    result = CliRunner().invoke(
        lock_wheels,
        [
            "--index",
            indexes["pytorch"],
            "--index",
            indexes["pypi-torch"],
            "--pypi",
            indexes["pypi"],
            "--lock-file",
            str(lock_path),
        ],
    )
    assert result.exit_code == 1, result.output
    assert "locked torch 2.13.0 cu126 cp313 x86_64-linux" in result.output
    assert "not found: torch 2.13.0 cpu cp313 x86_64-linux" in result.output
    assert lock_path.exists()
    # The python-depends are looked up on the same index, which has none of them;
    # with a lock file of its own, kernelnix's python-imports.json is not touched.
    assert (
        "not found: python-depends einops cp311 x86_64-linux: cannot read its index page"
        in result.output
    )
    assert not (tmp_path / "python-imports.json").exists()


def test_kernelnix_steps_take_the_packaged_kernelnix_without_torch(
    setup: Setup, tmp_path: Path
) -> None:
    """kernelnix's other steps (nix/lib/step.nix: the bundle's CARD.md here, and
    the plan when none is committed) run the Nix-packaged kernelnix in a Python
    without Torch, and nothing of this machine."""
    project = tmp_path / "carded"
    shutil.copytree(setup.complete, project, symlinks=True)
    (project / "CARD.md").write_text("# {{ repo_id }}\n")
    git(project, "add", "-A")
    bundle = evaluate(setup, project, "packages.x86_64-linux.bundle.drvPath")
    graph = closure(setup, bundle)
    card_drv = next(path for path in graph if drv_name(path) == "relu-card")
    card = graph[card_drv]
    assert card["args"][1] == "fill-card"
    assert card["args"][2].endswith("-relu-card-source")
    python = card["env"]["KERNELNIX_PYTHON"]
    assert python.startswith("/nix/store/") and python.endswith("/bin/python3")
    names = [drv_name(path) for path in closure(setup, card_drv)]
    assert any(name.startswith("kernelnix-") for name in names), names
    assert not [name for name in names if name.startswith("torch")], names
    strings = list(all_strings(card))
    assert not [s for s in strings for host in host_strings() if host in s]
    assert not [s for s in strings if s.startswith(("/usr", "/bin"))]


def test_building_a_variant_the_toolchain_leaves_out_says_why(setup: Setup) -> None:
    name = "torch213-cxx11-cu126-x86_64-linux"
    done = subprocess.run(
        ["kernelnix", "build", "--variant", name, str(setup.real)],
        env=setup.env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 2, done.stderr
    assert f"the flake does not build variant '{name}' on x86_64-linux: " in done.stderr
    assert "has no hash for the Torch 2.13.0 wheel for cu126" in done.stderr
    assert "Traceback" not in done.stderr


def test_the_variant_python_carries_the_kernels_python_depends(
    setup: Setup, tmp_path: Path
) -> None:
    source = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", source, ignore=shutil.ignore_patterns("build", "result"))
    toml = source / "build.toml"
    toml.write_text(
        toml.read_text().replace("[general]\n", '[general]\npython-depends = ["einops"]\n', 1)
    )
    project = hermetic_project(source, tmp_path / "project", setup.complete_url, setup.env)
    name = "torch213-cxx11-cu130-x86_64-linux"
    drv = evaluate(setup, project, f"packages.x86_64-linux.{name}.drvPath")
    graph = closure(setup, drv)
    python = graph[drv]["env"]["KERNELNIX_PYTHON"].removesuffix("/bin/python3")
    env_drv = next(p for p, d in graph.items() if d["outputs"]["out"]["path"] == python)
    assert "python3.13-einops" in [drv_name(p) for p in closure(setup, env_drv)]
    # ci-test runs the kernel's tests with the same Python.
    script = evaluate(setup, project, "packages.x86_64-linux.ci-test.drvPath")
    assert "python3.13-einops" in [drv_name(p) for p in closure(setup, script)]


def _shown(setup: Setup, project: Path, drvs: list[str]) -> dict[str, Any]:
    shown: dict[str, Any] = json.loads(
        nix(
            project, setup.env, "show-derivation", "-r", *drvs, "--option", "sandbox", "true"
        ).stdout
    )
    return shown


@pytest.mark.parametrize("example", sorted(p.name for p in EXAMPLES.iterdir() if p.is_dir()))
def test_every_offered_variant_shell_and_script_evaluates_for_the_sandbox(
    setup: Setup, tmp_path: Path, example: str
) -> None:
    """Every example, with the sandbox on: each variant the toolchain offers, its
    dev and test shells and the scripts evaluate, and every derivation they need
    is built by a store path with store-path tools (nothing of /bin or /usr)."""
    project = hermetic_project(
        EXAMPLES / example, tmp_path / example, setup.complete_url, setup.env
    )
    system = "x86_64-linux"
    sandboxed = [*OVERRIDES, "--option", "sandbox", "true"]
    offered = json.loads(
        nix(
            project, setup.env, "eval", "--json", f".#packages.{system}.variants", *sandboxed
        ).stdout
    )
    reasons = json.loads(
        nix(project, setup.env, "eval", "--json", f".#notOffered.{system}", *sandboxed).stdout
    )
    plan = json.loads((project / "kernelnix-plan.json").read_text())
    assert sorted([*offered, *reasons]) == sorted(plan["systems"][system]["variants"])
    if not offered:
        assert all(reasons.values())
        return
    packages = (
        "ps: [ ps.bundle.drvPath ps.ci-test.drvPath ] ++ map (n: ps.${n}.drvPath) ps.variants"
    )
    shells = "sh: [ sh.default.drvPath sh.test.drvPath ]"
    drvs = [
        drv
        for attribute, apply in ((f"packages.{system}", packages), (f"devShells.{system}", shells))
        for drv in json.loads(
            nix(
                project, setup.env, "eval", "--json", f".#{attribute}", "--apply", apply, *sandboxed
            ).stdout
        )
    ]
    for path, drv in _shown(setup, project, drvs).items():
        assert drv["builder"].startswith("/nix/store/"), (path, drv["builder"])
        for value in all_strings(drv):
            assert not value.startswith(("/bin/", "/usr/")), (path, value)


def test_header_dependencies_are_fetched_as_pinned(setup: Setup, tmp_path: Path) -> None:
    """examples/cute-scale's CUDA kernel `depends` on cutlass_3_8: its variant gets
    CUTLASS 3.8.0's source, a fixed-output fetch of the pinned tag and hash, as
    KERNELNIX_DEP_CUTLASS_3_8, where the build step looks."""
    project = hermetic_project(
        EXAMPLES / "cute-scale", tmp_path / "cute-scale", setup.complete_url, setup.env
    )
    name = "torch213-cxx11-cu130-x86_64-linux"
    drv = evaluate(setup, project, f"packages.x86_64-linux.{name}.drvPath")
    graph = closure(setup, drv)
    include = graph[drv]["env"]["KERNELNIX_DEP_CUTLASS_3_8"]
    assert include.endswith("/include")
    source = next(
        d for d in graph.values() if d["outputs"]["out"]["path"] == include.removesuffix("/include")
    )
    pins = json.loads((ROOT / "kernelnix" / "data" / "dependencies.json").read_text())
    pin = pins["dependencies"]["cutlass_3_8"]["hermetic"]
    assert (source["env"]["owner"], source["env"]["repo"], source["env"]["rev"]) == (
        "NVIDIA",
        "cutlass",
        "v3.8.0",
    )
    assert (
        source["outputs"]["out"]["hash"]
        == base64.b64decode(pin["hash"].removeprefix("sha256-")).hex()
    )
    # The dev shell (for `kernelnix build --local` in it) has it too.
    shell = evaluate(setup, project, "devShells.x86_64-linux.default.drvPath")
    assert closure(setup, shell)[shell]["env"]["KERNELNIX_DEP_CUTLASS_3_8"] == include
    # A kernel without `depends` (relu) gets none.
    relu = evaluate(setup, setup.complete, f"packages.x86_64-linux.{name}.drvPath")
    assert not [k for k in closure(setup, relu)[relu]["env"] if k.startswith("KERNELNIX_DEP_")]


def test_a_dependency_without_a_pin_leaves_the_variant_out(setup: Setup, tmp_path: Path) -> None:
    """On a kernelnix whose dependencies.json lacks the cutlass_3_8 pin."""
    kernelnix = tmp_path / "kernelnix"
    clone_worktree(kernelnix)
    data = kernelnix / "kernelnix" / "data" / "dependencies.json"
    pins = json.loads(data.read_text())
    del pins["dependencies"]["cutlass_3_8"]["hermetic"]
    data.write_text(json.dumps(pins))
    git(kernelnix, "commit", "-q", "-am", "no cutlass_3_8 pin")
    project = hermetic_project(
        EXAMPLES / "cute-scale", tmp_path / "project", f"git+file://{kernelnix}", setup.env
    )
    reasons = evaluate(setup, project, "notOffered.x86_64-linux")
    cuda = {n: r for n, r in reasons.items() if "-cu1" in n}
    assert cuda and all(
        "no pinned source for cutlass_3_8 (kernelnix/data/dependencies.json" in r
        for r in cuda.values()
    )
    assert evaluate(setup, project, "variants") == []  # cute-scale is a CUDA-only kernel


def test_every_dependency_pin_is_well_formed() -> None:
    data = json.loads((ROOT / "kernelnix" / "data" / "dependencies.json").read_text())
    pinned = {key: entry for key, entry in data["dependencies"].items() if "hermetic" in entry}
    assert set(data["dependencies"]) == set(pinned)
    for key, entry in pinned.items():
        pin = entry["hermetic"]
        assert pin["tag"] == f"v{entry['version']}", key
        assert (pin["owner"], pin["repo"]) == ("NVIDIA", "cutlass"), key
        assert re.fullmatch(r"sha256-[A-Za-z0-9+/]{43}=", pin["hash"]), key
    assert len({entry["hermetic"]["hash"] for entry in pinned.values()}) == len(pinned)
