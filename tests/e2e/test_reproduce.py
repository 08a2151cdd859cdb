"""`kernelnix reproduce` end to end: a real `nix build` of relu's CPU variant (the
host toolchain: no sandbox) compared with the same variant built earlier and
hashed with `kernelnix hash`, as a bundle directory and as a kernel repository
served by the fake Hub (tests/support/hubserver.py) at a revision, downloaded by
the real huggingface_hub: identical; then with one byte of its library changed.

The variant is built once for the module; when tests/e2e/test_nix_flake.py has
built relu's bundle in the same session, it is already in the Nix store and the
build costs an evaluation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest
from hubserver import FakeHub, repository_files
from nix_projects import clone_worktree, make_project, nix, nix_environment
from paths import EXAMPLES

from kernelnix.checks.elf import read_sections
from kernelnix.project.nix import FlakeProject, sandbox_options

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]


def kernelnix(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["kernelnix", *args], env=env, capture_output=True, text=True)


def writable_copy(store_path: Path, dest: Path) -> Path:
    """A copy of a store path whose files can be changed (the store's are read-only)."""
    shutil.copytree(store_path, dest)
    for root, dirs, files in os.walk(dest):
        for name in [*dirs, *files]:
            os.chmod(Path(root, name), 0o755 if name in dirs else 0o644)
    return dest


@dataclass(frozen=True)
class Built:
    """relu (host toolchain), its CPU variant's name and that variant built by Nix."""

    project: Path
    env: dict[str, str]
    variant: str
    earlier: Path


@pytest.fixture(scope="module")
def relu_cpu(tmp_path_factory: pytest.TempPathFactory) -> Built:
    work = tmp_path_factory.mktemp("reproduce")
    url = clone_worktree(work / "kernelnix")
    env = nix_environment(work / "registry.json", url)
    project = make_project(EXAMPLES / "relu", work / "relu", url, env, ("--toolchain", "host"))
    variants = json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)
    cpu = next(name for name in variants if "-cpu-" in name)
    nix(project, env, "build", f".#{cpu}", "--out-link", str(work / "earlier"))
    return Built(project, env, cpu, work / "earlier")


def published_copy(built: Built, dest: Path) -> Path:
    """A writable copy of the variant built earlier, hashed as `kernelnix hash` publishes it."""
    published = writable_copy(built.earlier, dest)
    assert kernelnix(built.env, "hash", str(published)).returncode == 0
    return published


def change_a_byte_of_rodata(library: Path) -> None:
    """Flip byte 5 of the library's .rodata section."""
    rodata = next(s for s in read_sections(library) if s.name == ".rodata")
    data = bytearray(library.read_bytes())
    data[rodata.offset + 5] ^= 1
    library.write_bytes(bytes(data))


def identical_lines(cpu: str, published: Path) -> list[str]:
    files = json.loads((published / cpu / "metadata.json").read_text())["digest"]["files"]
    return [
        f"{cpu}: identical",
        "  note: the rebuilt files match the reference's sha256 digest "
        f"({len(files)} files), as the `kernels` loader verifies it",
    ]


def differing_lines(cpu: str, library: Path) -> list[str]:
    return [
        f"{cpu}: differs",
        f"  {library.name}: ELF sections differ: .rodata (at byte 5 of the section)",
    ]


def test_reproduce_rebuilds_relus_cpu_variant_and_names_a_changed_library(
    relu_cpu: Built, tmp_path: Path
) -> None:
    project, env, cpu = relu_cpu.project, relu_cpu.env, relu_cpu.variant
    published = published_copy(relu_cpu, tmp_path / "published")

    done = kernelnix(env, "reproduce", str(project), "--variant", cpu, "--against", str(published))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == identical_lines(cpu, published)
    # The host toolchain builds outside the sandbox; nothing is left in the project.
    build = next(line for line in done.stderr.splitlines() if " build " in line)
    assert build.startswith("+ ") and "sandbox" not in build, done.stderr
    assert not (project / "result").exists()

    (library,) = (published / cpu).glob("*.so")
    change_a_byte_of_rodata(library)
    done = kernelnix(env, "reproduce", str(project), "--variant", cpu, "--against", str(published))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == differing_lines(cpu, library)


REPO = "kernelnix-tests/relu"


def test_reproduce_against_a_kernel_repository_on_the_hub_at_a_revision(
    relu_cpu: Built, tmp_path: Path
) -> None:
    """The reference is a kernel repository on the (fake) Hub: branch `v1` holds the
    published variant, `v1-patched` the same with one byte of its library changed;
    `--revision` picks one, and the real huggingface_hub downloads it."""
    project, cpu = relu_cpu.project, relu_cpu.variant
    published = published_copy(relu_cpu, tmp_path / "published")
    identical = repository_files(published)
    (library,) = (published / cpu).glob("*.so")
    change_a_byte_of_rodata(library)
    patched = repository_files(published)
    assert patched != identical
    with FakeHub(lifetime=600) as hub:
        hub.seed("kernel", REPO, {"main": {}, "v1": identical, "v1-patched": patched})
        env = {key: value for key, value in relu_cpu.env.items() if key != "HF_HUB_OFFLINE"}
        env |= {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hub-cache")}

        def against_hub(revision: str) -> subprocess.CompletedProcess[str]:
            options = ("--variant", cpu, "--against", REPO, "--revision", revision)
            return kernelnix(env, "reproduce", str(project), *options)

        done = against_hub("v1")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[:2] == identical_lines(cpu, published)

        done = against_hub("v1-patched")
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stdout.splitlines()[:2] == differing_lines(cpu, library)
    # Each branch was resolved to its commit, and the library downloaded at that commit.
    downloads = {path for _, path in hub.requests if "/resolve/" in path}
    for branch in ("v1", "v1-patched"):
        commit = hub.repos[("kernel", REPO)].branches[branch].head
        assert f"/kernels/{REPO}/resolve/{commit}/build/{cpu}/{library.name}" in downloads, (
            downloads
        )
    assert hub.unexpected == [] and {method for method, _ in hub.requests} <= {"GET", "HEAD"}


# The hermetic toolchain's case joins once nix/registry/ (issue 37) evaluates.
@pytest.mark.parametrize(("toolchain", "options"), [("host", ())])
def test_the_sandbox_is_on_for_the_hermetic_toolchain_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toolchain: str, options: tuple[str, ...]
) -> None:
    url = clone_worktree(tmp_path / "kernelnix")
    env = nix_environment(tmp_path / "registry.json", url)
    project = make_project(
        EXAMPLES / "relu", tmp_path / "relu", url, env, ("--toolchain", toolchain)
    )
    monkeypatch.setenv("NIX_CONFIG", env["NIX_CONFIG"])
    assert sandbox_options(FlakeProject(project), "bundle") == options
