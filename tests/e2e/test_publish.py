"""Publishing what was built (issue #17), end to end with real Nix, the host
toolchain and a fake Hub on 127.0.0.1 (tests/support/hubserver.py).

- relu-noarch built here through its flake: noarch variants have no native
  code, so they are publishable whoever built them. `kernelnix build-and-upload`
  pushes exactly the bundle it has just built, although `result` points at an
  older build and build/ holds a variant of another build.
- `nix run .#build-and-upload -- --dry-run` works with the network off: it shows
  the checks and the files per branch, and says the Hub was not contacted.
- relu built here with `hostGlibc = true` (against this machine's glibc): it
  is checked under the publishing policy and refused with its violations
  (this machine links libstdc++ dynamically), and `check` says why. Built by
  default (the glibc 2.27 target), each variant passes that policy and
  `build-and-upload` sends the bundle.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
from hubserver import TOKEN, FakeHub
from nix_projects import clone_worktree, make_project, nix, nix_environment
from paths import EXAMPLES

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

REPO = "kernelnix-examples/relu-noarch"


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    url = clone_worktree(tmp_path_factory.mktemp("kernelnix"))
    environment = nix_environment(tmp_path_factory.mktemp("nix") / "registry.json", url)
    return {**environment, "KERNELNIX_URL": url}


def project_of(example: str, root: Path, env: dict[str, str]) -> Path:
    return make_project(EXAMPLES / example, root / example, env["KERNELNIX_URL"], env)


@pytest.fixture
def hub() -> Iterator[FakeHub]:
    with FakeHub() as server:
        yield server
    assert server.unexpected == []


def kernelnix(
    env: dict[str, str], *args: str, cwd: Path | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kernelnix", *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=1200
    )


def online(env: dict[str, str], hub: FakeHub, home: Path) -> dict[str, str]:
    """`env` with the fake Hub as the endpoint and a token for it."""
    return {
        **env,
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "HF_TOKEN": TOKEN,
        "HF_HOME": str(home),
    }


def fake_variant(build: Path, name: str) -> None:
    """A variant of some other build: it must never be published here."""
    variant = build / name
    variant.mkdir(parents=True)
    (variant / "metadata.json").write_text('{"stale": true}\n')


def test_build_and_upload_pushes_exactly_what_it_built(
    env: dict[str, str], hub: FakeHub, tmp_path: Path
) -> None:
    project = project_of("relu-noarch", tmp_path, env)
    older = tmp_path / "older-build"
    fake_variant(older, "torch-cpu")
    # A stale result link: another build's output in the store (which Nix replaces).
    added = subprocess.run(
        ["nix-store", "--add", str(older)], env=env, capture_output=True, text=True, check=True
    )
    (project / "result").symlink_to(added.stdout.strip())
    fake_variant(project / "build", "torch-npu")  # another build's variant in build/
    done = kernelnix(
        online(env, hub, tmp_path / "hf"), "build-and-upload", "--no-import", str(project)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    bundle = (project / "result").resolve()
    assert bundle.is_relative_to("/nix/store")
    built = sorted(p.name for p in bundle.iterdir() if (p / "metadata.json").is_file())
    assert built and all(name.startswith("torch-") for name in built)
    pushed = {path for c in hub.commits if c.revision == "v1" for path in c.adds}
    assert {p.split("/")[1] for p in pushed if p.startswith("build/")} == set(built)
    for name in built:
        metadata = json.loads((bundle / name / "metadata.json").read_text())
        assert metadata["provenance"]["kernelnix"]["toolchain"] == "host"
        assert (
            hub.files("kernel", REPO, "v1")[f"build/{name}/metadata.json"]
            == (bundle / name / "metadata.json").read_bytes()
        )
    lines = done.stdout.splitlines()
    assert "checked under the publishing policy (kernel):" in lines
    assert any(
        line.startswith(f"  {built[0]}: ok under policy kernel") and "host toolchain" in line
        for line in lines
    ), lines
    assert (project / "build" / "torch-npu").is_dir()  # left alone, not pushed


def test_dry_run_works_offline(env: dict[str, str], tmp_path: Path) -> None:
    project = project_of("relu-noarch", tmp_path, env)
    offline = {**env, "HF_HUB_OFFLINE": "1", "HF_ENDPOINT": "http://127.0.0.1:9"}
    offline.pop("HF_TOKEN", None)
    done = nix(project, offline, "run", ".#build-and-upload", "--", "--dry-run", "--no-import")
    lines = done.stdout.splitlines()
    bundle = next(
        Path(line.split("(")[1].rstrip(")")).parent.parent
        for line in lines
        if line.startswith("  add    build/") and "/metadata.json" in line
    )
    assert bundle.is_relative_to("/nix/store")
    assert f"{len(list(bundle.glob('torch-*')))} variant(s) for {REPO}, branch v1" in lines
    assert "the Hub was not contacted" in done.stdout
    assert lines[-1] == f"dry run: nothing was sent to http://127.0.0.1:9/kernels/{REPO}/tree/v1"


def test_a_host_glibc_build_is_checked_under_the_publishing_policy(
    env: dict[str, str], hub: FakeHub, tmp_path: Path
) -> None:
    """`hostGlibc = true`: relu built against this machine's glibc, which upload refuses."""
    project = project_of("relu", tmp_path, env)
    flake = project / "flake.nix"
    flake.write_text(
        flake.read_text().replace(
            'toolchain = "host";', 'toolchain = "host";\n      hostGlibc = true;'
        )
    )
    done = kernelnix(
        online(env, hub, tmp_path / "hf"), "build-and-upload", "--no-import", str(project)
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "needed-library: libstdc++.so.6" in done.stderr
    assert "(policy kernel)" in done.stderr
    assert "fix: " in done.stderr and "Traceback" not in done.stderr
    assert hub.requests == []
    # The build's own verdict, under the policy it recorded, was a pass; check says
    # that upload refuses it.
    bundle = (project / "result").resolve()
    check = kernelnix(env, "check", "--no-import", str(bundle))
    assert check.returncode == 0, check.stdout
    assert "the one the host-toolchain build passed" in check.stdout
    assert "which `upload` refuses" in check.stdout
    assert os.path.isdir(bundle)


def test_a_default_host_build_is_publishable(
    env: dict[str, str], hub: FakeHub, tmp_path: Path
) -> None:
    """relu through its flake with the host toolchain: against the glibc 2.27 target,
    each variant passes the publishing policy and upload sends the bundle."""
    project = project_of("relu", tmp_path, env)
    done = kernelnix(
        online(env, hub, tmp_path / "hf"), "build-and-upload", "--no-import", str(project)
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "checked under the publishing policy (kernel):" in done.stdout.splitlines()
    bundle = (project / "result").resolve()
    built = sorted(p.name for p in bundle.iterdir() if (p / "metadata.json").is_file())
    compiled = [name for name in built if "-cpu-" in name or "-cu" in name]
    assert compiled, built
    pushed = {path for c in hub.commits if c.revision == "v1" for path in c.adds}
    assert {p.split("/")[1] for p in pushed if p.startswith("build/")} == set(built)
    for name in compiled:
        check = kernelnix(
            env, "check", "--policy", "kernel", "--redistributable", "--no-import",
            str(bundle / name),
        )  # fmt: skip
        assert check.returncode == 0, check.stdout
