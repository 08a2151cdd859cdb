"""`kernelnix reproduce` end to end: a real `nix build` of relu's CPU variant (the
host toolchain: no sandbox) compared with the same variant built earlier and
hashed with `kernelnix hash`: identical; then with one byte of its library changed.

When tests/e2e/test_nix_flake.py has built relu's bundle in the same session,
the variant is already in the Nix store and the build costs an evaluation.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest
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


def test_reproduce_rebuilds_relus_cpu_variant_and_names_a_changed_library(
    tmp_path: Path,
) -> None:
    url = clone_worktree(tmp_path / "kernelnix")
    env = nix_environment(tmp_path / "registry.json", url)
    project = make_project(EXAMPLES / "relu", tmp_path / "relu", url, env)
    variants = json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)
    cpu = next(name for name in variants if "-cpu-" in name)
    nix(project, env, "build", f".#{cpu}", "--out-link", str(tmp_path / "earlier"))
    published = writable_copy(tmp_path / "earlier", tmp_path / "published")
    assert kernelnix(env, "hash", str(published)).returncode == 0

    done = kernelnix(env, "reproduce", str(project), "--variant", cpu, "--against", str(published))
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == [
        f"{cpu}: identical",
        "  note: the rebuilt files match the reference's sha256 digest "
        f"({len(json.loads((published / cpu / 'metadata.json').read_text())['digest']['files'])}"
        " files), as the `kernels` loader verifies it",
    ]
    # The host toolchain builds outside the sandbox; nothing is left in the project.
    build = next(line for line in done.stderr.splitlines() if " build " in line)
    assert build.startswith("+ ") and "sandbox" not in build, done.stderr
    assert not (project / "result").exists()

    (library,) = (published / cpu).glob("*.so")
    rodata = next(s for s in read_sections(library) if s.name == ".rodata")
    data = bytearray(library.read_bytes())
    data[rodata.offset + 5] ^= 1
    library.write_bytes(bytes(data))
    done = kernelnix(env, "reproduce", str(project), "--variant", cpu, "--against", str(published))
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stdout.splitlines()[:2] == [
        f"{cpu}: differs",
        f"  {library.name}: ELF sections differ: .rodata (at byte 5 of the section)",
    ]


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
