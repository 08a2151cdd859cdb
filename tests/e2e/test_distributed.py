"""Past one machine, with real Nix: a signed binary cache served over HTTP on
127.0.0.1, from which a fresh store substitutes a bundle and compiles nothing; the
same cache tampered with, or trusted with the wrong key, refused; an ssh-ng remote
builder on 127.0.0.1 (an sshd started here, with keys made here) that builds a
variant into a store of its own while nothing builds locally; and the host
toolchain's derivations addressed by the host record's identity, which a builder
with another compiler refuses.

The "fresh machine" is a Nix store in a temporary directory (`--store DIR`, a
chroot store); options go on the command line, /etc/nix/nix.conf is not touched.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from compiler_cache import python_prefixes
from fresh_python import run_python
from nix_projects import clone_worktree, git, make_project, nix, nix_environment
from nix_remote import SSHD, CacheServer, remote_daemon, serve_directory, sshd
from paths import EXAMPLES, ROOT

from kernelnix.host.record import HOST_FILE
from kernelnix.host.system import current_system

# About 3 minutes with sshd and a second store: `pytest --heavy`.
pytestmark = [
    pytest.mark.slow,
    pytest.mark.heavy,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

SYSTEM = current_system()


@dataclass(frozen=True)
class Relu:
    project: Path
    env: dict[str, str]
    variants: list[str]  # the variants of the bundle
    paths: dict[str, str]  # attribute (bundle, each variant) -> output path


@pytest.fixture(scope="module")
def relu(tmp_path_factory: pytest.TempPathFactory) -> Relu:
    """examples/relu's bundle, built with the host toolchain (the same store paths as
    tests/e2e/test_nix_flake.py's, so a run of both builds it once)."""
    work = tmp_path_factory.mktemp("distributed")
    url = clone_worktree(work / "kernelnix")
    env = nix_environment(work / "registry.json", url)
    project = make_project(EXAMPLES / "relu", work / "relu", url, env)
    nix(project, env, "build", ".#bundle", "--no-link")
    variants = json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)
    plan = json.loads((project / "kernelnix-plan.json").read_text())
    bundled = [v for v in plan["systems"][SYSTEM]["bundle"] if v in variants]
    assert bundled, "the host toolchain should build relu's CPU variant here"
    paths = {
        attr: nix(project, env, "eval", "--raw", f".#{attr}.outPath").stdout
        for attr in ["bundle", *bundled]
    }
    return Relu(project, env, bundled, paths)


@dataclass(frozen=True)
class Cache:
    directory: Path
    public_key: str
    server: CacheServer


@pytest.fixture(scope="module")
def cache(relu: Relu, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cache]:
    """The bundle and its variants, signed with a key made here, in a file cache
    served over HTTP on 127.0.0.1."""
    work = tmp_path_factory.mktemp("cache")
    secret = work / "secret-key"
    secret.write_text(nix(work, relu.env, "key", "generate-secret", "--key-name", "test-1").stdout)
    public = convert_to_public(secret.read_text(), relu.env)
    # Uncompressed, so that a test can tamper with a NAR byte for byte.
    directory = work / "cache"
    target = f"file://{directory}?secret-key={secret}&compression=none"
    nix(relu.project, relu.env, "copy", "--to", target, *(f".#{a}" for a in relu.paths))
    with serve_directory(directory) as server:
        yield Cache(directory, public, server)


def convert_to_public(secret: str, env: dict[str, str]) -> str:
    done = subprocess.run(
        ["nix", "key", "convert-secret-to-public"],
        input=secret,
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    return done.stdout.strip()


def build_in_fresh_store(
    relu: Relu, store: Path, substituter: str, public_key: str, *attrs: str
) -> subprocess.CompletedProcess[str]:
    """`nix build` into an empty store that may substitute from `substituter` only,
    signatures required, nothing built here (`--max-jobs 0`)."""
    return nix(
        relu.project,
        relu.env,
        "build",
        *(f".#{a}" for a in attrs),
        "--store",
        str(store),
        "--no-link",
        "--max-jobs",
        "0",
        "--option",
        "substituters",
        substituter,
        "--option",
        "trusted-public-keys",
        public_key,
        "--option",
        "require-sigs",
        "true",
        # Nix caches narinfo lookups per URL, and a later run may get the same port.
        "--option",
        "narinfo-cache-negative-ttl",
        "0",
        "--option",
        "narinfo-cache-positive-ttl",
        "0",
        check=False,
    )


def valid_in(store: Path | None, path: str, env: dict[str, str]) -> bool:
    """Whether `path` is valid in `store` (None: this machine's store)."""
    where = ["--store", str(store)] if store else []
    done = subprocess.run(["nix", "path-info", *where, path], capture_output=True, env=env)
    return done.returncode == 0


def test_the_bundle_closure_is_the_bundle(relu: Relu) -> None:
    """Nothing the build read (Torch, the glibc target, the sources) stays referred to:
    the closure a cache or a remote builder moves is the bundle (a copy of its
    variants) alone, under 5 MB; so is each variant's."""
    for attr, path in relu.paths.items():
        closure = json.loads(nix(relu.project, relu.env, "path-info", "--json", "-rS", path).stdout)
        assert [entry["path"] for entry in closure] == [path], (attr, closure)
        assert closure[0]["closureSize"] < 5 * 2**20, (attr, closure)


def test_a_fresh_store_substitutes_the_bundle_and_compiles_nothing(
    relu: Relu, cache: Cache, tmp_path: Path
) -> None:
    store = tmp_path / "fresh"
    done = build_in_fresh_store(relu, store, cache.server.url, cache.public_key, *relu.paths)
    assert done.returncode == 0, done.stderr
    assert "building '" not in done.stderr, done.stderr
    for attr, path in relu.paths.items():
        copied = f"copying path '{path}' from '{cache.server.url}'"
        assert copied in done.stderr, (attr, done.stderr)
        assert valid_in(store, path, relu.env), attr
        assert f"/{Path(path).name[:32]}.narinfo" in cache.server.requests, attr
    # What arrived is the kernel: relu computes through `kernels` from the fresh store.
    script = (
        "import sys, torch; from pathlib import Path; from kernels import get_local_kernel\n"
        "relu = get_local_kernel(Path(sys.argv[1]))\n"
        "print(relu.relu(torch.tensor([-1.0, 2.0])).tolist())\n"
    )
    fresh_bundle = store / relu.paths["bundle"].lstrip("/")
    assert run_python(script, str(fresh_bundle)).strip() == "[0.0, 2.0]"


def test_a_substitute_signed_with_another_key_is_refused(
    relu: Relu, cache: Cache, tmp_path: Path
) -> None:
    other = nix(tmp_path, relu.env, "key", "generate-secret", "--key-name", "other-1").stdout
    store = tmp_path / "fresh"
    done = build_in_fresh_store(
        relu, store, cache.server.url, convert_to_public(other, relu.env), "bundle"
    )
    assert done.returncode != 0
    for path in relu.paths.values():
        assert f"the substitute for '{path}' from '{cache.server.url}' is not signed" in (
            done.stderr
        )
        assert not valid_in(store, path, relu.env)
    # Refused, so Nix would build instead: --max-jobs 0 forbids it here.
    assert "unable to start any build" in done.stderr, done.stderr


def test_a_tampered_nar_is_refused(relu: Relu, cache: Cache, tmp_path: Path) -> None:
    tampered = tmp_path / "cache"
    shutil.copytree(cache.directory, tampered)
    for nar in (tampered / "nar").glob("*.nar"):
        data = bytearray(nar.read_bytes())
        data[len(data) // 2] ^= 0xFF
        nar.write_bytes(bytes(data))
    store = tmp_path / "fresh"
    with serve_directory(tampered) as server:
        done = build_in_fresh_store(relu, store, server.url, cache.public_key, "bundle")
    assert done.returncode != 0
    assert re.search(r"hash mismatch importing path '/nix/store/[^']+-relu-", done.stderr), (
        done.stderr
    )
    for path in relu.paths.values():
        assert not valid_in(store, path, relu.env)


def host_python_dirs(project: Path) -> list[str]:
    """The directories of the recorded Python's installation (and of its base, for a
    virtual environment), which a sandboxed host build must see."""
    python = json.loads((project / HOST_FILE).read_text())["python"]
    return sorted({os.path.realpath(p) for p in python_prefixes(python)})


# CI installs openssh-server (scripts/setup.sh): there a missing sshd fails the test.
@pytest.mark.skipif(
    not SSHD.exists() and not os.environ.get("CI"), reason="needs openssh-server (scripts/setup.sh)"
)
@pytest.mark.skipif(os.geteuid() != 0, reason="sshd's privilege separation needs root")
def test_a_remote_builder_builds_a_variant_while_nothing_builds_here(
    relu: Relu, tmp_path: Path
) -> None:
    """`--max-jobs 0 --builders ssh-ng://...`: the remote daemon builds into a store of
    its own (`?remote-store=`, sandboxed, with the host toolchain's directories bound
    in), and the output arrives in this store."""
    project = tmp_path / "relu"
    shutil.copytree(relu.project, project, symlinks=True)
    # A source no store has built yet: the build must happen somewhere.
    source = project / "relu_cpu" / "relu_cpu.cpp"
    source.write_text(source.read_text() + f"// {uuid.uuid4()}\n")
    git(project, "add", "-A")
    variant = relu.variants[0]
    out = nix(project, relu.env, "eval", "--raw", f".#{variant}.outPath").stdout
    assert not valid_in(None, out, relu.env)
    remote_store = tmp_path / "remote-store"
    bound = ["/bin", "/usr", "/lib", "/lib64", "/etc", *host_python_dirs(project)]
    daemon = remote_daemon(tmp_path / "remote-daemon", [p for p in bound if Path(p).exists()])
    with sshd(tmp_path / "ssh") as builder:
        machine = f"{builder.store_url(remote_store, daemon)} {SYSTEM} {builder.key} 1"
        env = {**relu.env, "NIX_SSHOPTS": builder.ssh_options}
        done = nix(
            project,
            env,
            "build",
            f".#{variant}",
            "--no-link",
            "-L",
            "--max-jobs",
            "0",
            "--builders",
            machine,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"on 'ssh-ng://{builder.host}" in done.stderr, done.stderr[-3000:]
    assert re.search(rf"copying path '{re.escape(out)}' from 'ssh-ng://", done.stderr)
    # Built there, into its own store, and now here too.
    assert (remote_store / out.lstrip("/") / variant / "metadata.json").is_file()
    assert valid_in(None, out, relu.env)


def record_with(project: Path, change: dict[str, str]) -> None:
    record = json.loads((project / HOST_FILE).read_text())
    record["identity"]["compilers"].update(change)
    (project / HOST_FILE).write_text(json.dumps(record))
    git(project, "add", "-A")


def derivation_env(project: Path, env: dict[str, str], attr: str) -> dict[str, str]:
    shown = json.loads(nix(project, env, "show-derivation", f".#{attr}").stdout)
    found: dict[str, str] = next(iter(shown.values()))["env"]
    return found


def test_the_host_record_identity_addresses_the_variants(relu: Relu, tmp_path: Path) -> None:
    variant = relu.variants[0]
    drv = derivation_env(relu.project, relu.env, variant)
    identity = json.loads((relu.project / HOST_FILE).read_text())["identity"]
    if "wheelEnv" not in drv:  # else the wheels give Torch and nvcc (the test below)
        assert json.loads(drv["hostIdentity"]) == identity
    assert "allowSubstitutes" not in drv and "preferLocalBuild" not in drv
    assert "allowSubstitutes" not in derivation_env(relu.project, relu.env, "bundle")

    # Another compiler: another store path.
    other = tmp_path / "other"
    shutil.copytree(relu.project, other, symlinks=True)
    compiler = next(iter(identity["compilers"]))
    record_with(other, {compiler: "g++ (Other) 99.1.0"})
    moved = nix(other, relu.env, "eval", "--raw", f".#{variant}.outPath").stdout
    assert moved != relu.paths[variant]

    # A record without an identity: built where asked, never substituted.
    old = tmp_path / "old"
    shutil.copytree(relu.project, old, symlinks=True)
    record = json.loads((old / HOST_FILE).read_text())
    del record["identity"]
    (old / HOST_FILE).write_text(json.dumps(record))
    git(old, "add", "-A")
    drv = derivation_env(old, relu.env, variant)
    assert drv["allowSubstitutes"] == "" and drv["preferLocalBuild"] == "1"
    assert derivation_env(old, relu.env, "bundle")["allowSubstitutes"] == ""


def test_a_builder_with_another_compiler_refuses_to_build(relu: Relu, tmp_path: Path) -> None:
    """The record says g++ 99; this machine's is not: the build stops before compiling."""
    project = tmp_path / "relu"
    shutil.copytree(relu.project, project, symlinks=True)
    record = json.loads((project / HOST_FILE).read_text())
    compiler = next(iter(record["identity"]["compilers"]))
    record_with(project, {compiler: "g++ (Other) 99.1.0"})
    done = nix(project, relu.env, "build", f".#{relu.variants[0]}", "--no-link", check=False)
    assert done.returncode != 0
    assert "this machine is not the one kernelnix-host.json describes" in done.stderr
    assert f'compilers.{compiler}: recorded "g++ (Other) 99.1.0", this machine has' in (done.stderr)
    assert "+ cmake" not in done.stderr, "the build should stop before configuring"


def test_a_variant_of_locked_wheels_leaves_the_machines_torch_and_nvcc_out() -> None:
    """nix/toolchains/host/identity.nix: the wheels give Torch and nvcc, as store paths."""
    identity = {
        "c-library": "glibc 2.36",
        "compilers": {"g++": "g++ 12", "nvcc": "release 13.0"},
        "python": "cpython 3.11.7",
        "torch": "2.13.0+cpu",
    }
    record = json.dumps({"identity": identity})
    expression = (
        f"let identity = import {ROOT}/nix/toolchains/host/identity.nix "
        f"{{ record = builtins.fromJSON ''{record}''; }}; in "
        '{ host = identity null; wheels = identity "/nix/store/x-wheels"; '
        "none = import " + f"{ROOT}/nix/toolchains/host/identity.nix {{ record = null; }} null; }}"
    )
    done = subprocess.run(
        ["nix-instantiate", "--eval", "--strict", "--json", "--expr", expression],
        capture_output=True,
        text=True,
        check=True,
    )
    found = json.loads(done.stdout)
    assert json.loads(found["host"]["hostIdentity"]) == identity
    assert json.loads(found["wheels"]["hostIdentity"]) == {
        "c-library": "glibc 2.36",
        "compilers": {"g++": "g++ 12"},
        "python": "cpython 3.11.7",
    }
    assert found["none"] == {"allowSubstitutes": False, "preferLocalBuild": True}
