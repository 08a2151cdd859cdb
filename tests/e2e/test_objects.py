"""A variant built object by object (kernelFlake's objectBuild, docs/distributed.md):
fused-scale's CUDA variant through the hermetic toolchain in the sandbox, as a
configure derivation, one derivation per compiled source and the variant
derivation that links them.

- Its NAR hash is the one-derivation build's (a copy of the project without
  objectBuild, the same commit date, so the same op namespace).
- A build stopped after its first object keeps it: the rerun compiles the rest.
- Editing one source rebuilds that object and the variant, nothing else.
- The host toolchain builds the same way (outside the sandbox, where each
  derivation has a build folder of its own name).
- `kernelnix build` says how many objects it will build and reports each.
- Two remote builders on 127.0.0.1 (ssh-ng, each with a store of its own) share
  the objects of fused-scale's CPU variant.

The project is committed and then edited, as a kernel author's tree is: a dirty
tree's op namespace (`<commit date>-dirty`, Nix 2.8) stays put while it is
edited, so the objects that do not change stay valid (a commit renames the
namespace, which every compile sees).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest
from nix_projects import GIT_IDENTITY, git, kernelnix_clone, make_project, nix
from nix_remote import SSHD, descendants, remote_daemon, sshd
from paths import EXAMPLES

SANDBOX = ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false")
CUDA = "torch213-cxx11-cu130-x86_64-linux"
CPU = "torch213-cxx11-cpu-x86_64-linux"
PACKAGE = f"packages.x86_64-linux.{CUDA}"
UNITS = (
    "fused_scale_cuda/dispatch.cu",
    "fused_scale_cuda/kernels.cu",
    "torch-ext/torch_binding.cpp",
)
COMMIT_DATE = "2026-01-01T00:00:00+00:00"

pytestmark = pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix")


@dataclass(frozen=True)
class Project:
    path: Path
    env: dict[str, str]

    def nix(self, *args: str) -> subprocess.CompletedProcess[str]:
        return nix(self.path, self.env, *args)

    def attribute(self, expression: str) -> object:
        """`expression` of the variant's package: an attribute, or `drvAttrs ? name`."""
        apply = f"package: package.{expression}"
        return json.loads(self.nix("eval", "--json", f".#{PACKAGE}", "--apply", apply).stdout)

    def will_build(self) -> list[str]:
        """The names of the derivations `nix build` of the variant would build."""
        return derivations_to_build(self.nix("build", f".#{CUDA}", "--dry-run", *SANDBOX).stderr)

    def build(self, *options: str) -> subprocess.CompletedProcess[str]:
        return self.nix("build", f".#{CUDA}", "-o", str(self.path / "result"), *SANDBOX, *options)

    def edit(self, source: str, text: str) -> None:
        """Append a line no build of this store has seen."""
        with (self.path / source).open("a") as file:
            file.write(f"\n// {text} {uuid.uuid4()}\n")
        git(self.path, "add", "-A")


def derivations_to_build(dry_run: str) -> list[str]:
    """The names of the derivations a `nix build --dry-run` would build."""
    listed = dry_run.partition("will be built:")[2].partition("will be fetched")[0]
    return sorted(re.findall(r"/nix/store/[a-z0-9]{32}-(.+)\.drv", listed))


def built_derivations(log: str) -> list[str]:
    """The names of the derivations a `nix build` log says it built."""
    return sorted(re.findall(r"building '/nix/store/[a-z0-9]{32}-(.+)\.drv'", log))


def committed_project(
    work: Path, url: str, env: dict[str, str], name: str, objects: bool, nonce: str
) -> Project:
    path = make_project(
        EXAMPLES / "fused-scale",
        work / name,
        url,
        env,
        ("--toolchain", "hermetic", "--no-host-record"),
    )
    # Sources no build of this store has seen (the same in both projects).
    header = path / "fused_scale_cuda" / "kernels.cuh"
    header.write_text(f"{header.read_text()}\n// {nonce}\n")
    if objects:
        flake = path / "flake.nix"
        flake.write_text(
            flake.read_text().replace("path = ./.;", "path = ./.;\n      objectBuild = true;")
        )
    committed = {**env, "GIT_AUTHOR_DATE": COMMIT_DATE, "GIT_COMMITTER_DATE": COMMIT_DATE}
    nix(path, env, "flake", "lock")
    git(path, "add", "-A")
    subprocess.run(
        ["git", *GIT_IDENTITY, "commit", "-qm", "kernel"], cwd=path, env=committed, check=True
    )
    # Dirty from here on: the op namespace is the commit date's (see the module's text).
    (path / "README.md").write_text((path / "README.md").read_text() + "\nedited\n")
    return Project(path, env)


@pytest.fixture(scope="module")
def projects(tmp_path_factory: pytest.TempPathFactory) -> tuple[Project, Project]:
    work = tmp_path_factory.mktemp("objects")
    url, env = kernelnix_clone(work, ("2.13-cuda-13",))
    nonce = str(uuid.uuid4())
    return (
        committed_project(work, url, env, "by-object", objects=True, nonce=nonce),
        committed_project(work, url, env, "one-step", objects=False, nonce=nonce),
    )


def cpu_project(work: Path) -> Project:
    """fused-scale object by object, committed, with only the CPU Torch locked."""
    url, env = kernelnix_clone(work, ("2.13-cpu",))
    return committed_project(work, url, env, "by-object", objects=True, nonce=str(uuid.uuid4()))


def needs_sshd(test: Callable[..., None]) -> Callable[..., None]:
    """A test of ssh-ng builders on 127.0.0.1. CI installs openssh-server
    (scripts/setup.sh): there a missing sshd fails the test."""
    no_sshd = not SSHD.exists() and not os.environ.get("CI")
    test = pytest.mark.skipif(no_sshd, reason="needs openssh-server (scripts/setup.sh)")(test)
    not_root = os.geteuid() != 0
    return pytest.mark.skipif(not_root, reason="sshd's privilege separation needs root")(test)


def nar_hash(project: Project) -> str:
    return nar_hash_of(project, str(project.attribute("outPath")))


def nar_hash_of(project: Project, path: str, *store: str) -> str:
    info = project.nix("path-info", "--json", *store, path).stdout
    return str(json.loads(info)[0]["narHash"])


def test_a_cuda_variant_built_object_by_object_has_the_one_step_build_s_nar_hash(
    projects: tuple[Project, Project],
) -> None:
    by_object, one_step = projects
    objects = by_object.attribute("objects")
    assert isinstance(objects, list)
    assert sorted(Path(o).name.split("-", 1)[1] for o in objects) == sorted(
        f"fused_scale-{CUDA}-{Path(u).name}.o" for u in UNITS
    )
    assert not one_step.attribute("drvAttrs ? objects")
    by_object.build()
    configured = Path(str(by_object.attribute("configured.outPath")))
    assert sorted(json.loads((configured / "objects.json").read_text())["objects"]) == list(UNITS)
    one_step.build()
    assert nar_hash(by_object) == nar_hash(one_step)


def test_a_stopped_build_keeps_its_objects_and_the_rerun_compiles_the_rest(
    projects: tuple[Project, Project],
) -> None:
    project = projects[0]
    # A header every source includes: all three objects are to be built again.
    project.edit("fused_scale_cuda/kernels.cuh", "stopped build")
    objects = [f"fused_scale-{CUDA}-{Path(u).name}.o" for u in UNITS]
    assert project.will_build() == sorted([*objects, f"fused_scale-{CUDA}"])
    process = subprocess.Popen(
        ["nix", "build", f".#{CUDA}", "--no-link", "-L", "--max-jobs", "1", *SANDBOX],
        cwd=project.path,
        env=project.env,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stderr is not None
    # One build at a time: when the second object starts, the first is in the store.
    started = []
    for line in process.stderr:
        found = re.search(r"building '/nix/store/[a-z0-9]{32}-(.+\.o)\.drv'", line)
        if found:
            started.append(found[1])
            if len(started) == 2:
                break
    os.killpg(process.pid, signal.SIGINT)
    process.wait()
    finished = started[0] if started else None
    assert finished is not None
    left = project.will_build()
    assert finished not in left
    assert left == sorted(o for o in [*objects, f"fused_scale-{CUDA}"] if o != finished)
    log = project.build("-L").stderr
    assert "building '/nix/store/" in log
    assert not re.search(rf"-{re.escape(finished)}\.drv'", log)


def test_editing_one_source_compiles_one_object_and_links(
    projects: tuple[Project, Project],
) -> None:
    project = projects[0]
    project.build()
    project.edit("fused_scale_cuda/dispatch.cu", "one edit")
    assert project.will_build() == sorted(
        [f"fused_scale-{CUDA}-dispatch.cu.o", f"fused_scale-{CUDA}"]
    )
    built = built_derivations(project.build("-L").stderr)
    assert built == sorted([f"fused_scale-{CUDA}-dispatch.cu.o", f"fused_scale-{CUDA}"])


def test_a_second_store_substitutes_from_a_binary_cache_and_compiles_the_edited_object(
    tmp_path: Path,
) -> None:
    """A team's setup (docs/distributed.md): the store that built fused-scale's CPU
    variant object by object copies the variant's build closure (toolchain, Torch,
    configured tree, objects) into a signed binary cache; a second store (its own
    root) with one source edited substitutes all of it but the edited object,
    compiles that one and links, into the bytes the first store builds."""
    project = cpu_project(tmp_path)
    env = project.env
    nix(project.path, env, "build", f".#{CPU}", "--no-link", *SANDBOX)
    secret = tmp_path / "cache-secret.key"
    secret.write_text(nix(tmp_path, env, "key", "generate-secret", "--key-name", "team-1").stdout)
    public = subprocess.run(
        ["nix", "key", "convert-secret-to-public"],
        input=secret.read_text(), env=env, capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    # docs/distributed.md's command: every output of the variant's build closure.
    drv = nix(project.path, env, "eval", "--raw", f".#{CPU}.drvPath").stdout
    requisites = subprocess.run(
        ["nix-store", "--query", "--requisites", "--include-outputs", drv],
        env=env, capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    cache = f"file://{tmp_path / 'cache'}"
    nix(
        tmp_path, env, "copy", "--to", f"{cache}?compression=none&secret-key={secret}",
        *[p for p in requisites if not p.endswith(".drv")],
    )  # fmt: skip
    project.edit("fused_scale_cpu/fused_scale.cpp", "edited on the second machine")
    second_store = ("--store", str(tmp_path / "second-store"))
    second = (
        *second_store,
        "--option", "substituters", cache,
        "--option", "trusted-public-keys", public,
        *SANDBOX,
    )  # fmt: skip
    edited = sorted([f"fused_scale-{CPU}-fused_scale.cpp.o", f"fused_scale-{CPU}"])
    planned = project.nix("build", f".#{CPU}", "--dry-run", *second)
    assert derivations_to_build(planned.stderr) == edited, planned.stderr
    done = project.nix("build", f".#{CPU}", "--no-link", "-L", *second)
    assert built_derivations(done.stderr) == edited
    assert f"ok    {CPU}: no violations" in done.stderr
    project.nix("build", f".#{CPU}", "--no-link", *SANDBOX)
    path = project.nix("eval", "--raw", f".#{CPU}.outPath").stdout
    assert nar_hash_of(project, path, *second_store) == nar_hash_of(project, path)


@needs_sshd
def test_two_builders_share_the_objects_of_one_variant(tmp_path: Path) -> None:
    """`--max-jobs 0 --builders 'A ; B'`, one job each: the configure step runs on one,
    then the two objects run at once, one on each, and the variant on either. Each
    builder is a daemon with a store of its own (`?remote-store=`), which gets the
    toolchain and the CPU Torch copied over ssh."""
    project = cpu_project(tmp_path)
    daemon = remote_daemon(tmp_path / "remote-daemon", [])
    with sshd(tmp_path / "ssh") as builder:
        stores = [builder.store_url(tmp_path / f"store-{n}", daemon) for n in ("a", "b")]
        machines = " ; ".join(f"{store} x86_64-linux {builder.key} 1" for store in stores)
        done = nix(
            project.path,
            {**project.env, "NIX_SSHOPTS": builder.ssh_options},
            "build",
            f".#{CPU}",
            "--no-link",
            "--max-jobs",
            "0",
            "--builders",
            machines,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-3000:]
    where = dict(
        re.findall(r"building '/nix/store/[a-z0-9]{32}-(.+)\.drv' on '([^']+)'", done.stderr)
    )
    objects = [f"fused_scale-{CPU}-{name}.o" for name in ("fused_scale.cpp", "torch_binding.cpp")]
    assert sorted(where.get(o, "here") for o in objects) == sorted(stores), done.stderr[-3000:]


@needs_sshd
def test_a_builder_that_dies_mid_object_is_one_error_naming_the_object(tmp_path: Path) -> None:
    """`kernelnix build --max-jobs 0 --builders ...`: the builder's nix-daemon is killed
    while it compiles an object (the compiler running below it); the build ends
    with one explained error (exit 2) naming that object and what to do, and
    nothing of the object is in this store."""
    project = cpu_project(tmp_path)
    daemon = remote_daemon(tmp_path / "remote-daemon", [])
    with sshd(tmp_path / "ssh") as builder:
        machine = f"{builder.store_url(tmp_path / 'store', daemon)} x86_64-linux {builder.key} 1"
        process = subprocess.Popen(
            ["kernelnix", "build", str(project.path), "--variant", CPU, "--max-jobs", "0",
             "--builders", machine],
            env={**project.env, "NIX_SSHOPTS": builder.ssh_options},
            stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        assert process.stderr is not None
        compiling = None
        for line in process.stderr:
            found = re.search(r"building '/nix/store/[a-z0-9]{32}-(.+\.o)\.drv' on", line)
            if found:
                compiling = found[1]
                break
        assert compiling is not None
        # Killed once the compiler runs under the builder's daemon, mid-object.
        while "cc1plus" not in descendants(builder.pid).values():
            assert process.poll() is None, "the build ended before its object compiled"
            time.sleep(0.1)
        for pid, name in descendants(builder.pid).items():
            if name == "nix-daemon":
                os.kill(pid, signal.SIGKILL)
        rest = process.stderr.read()
        process.wait()
    assert process.returncode == 2, rest[-3000:]
    assert (
        f"the connection to the remote builder of {compiling} ended while it was building it"
        in rest
    ), rest[-3000:]
    assert "build again: what finished is kept and only the rest is built" in rest
    assert "Traceback" not in rest
    named = f'os: (builtins.head (builtins.filter (o: o.name == "{compiling}") os)).outPath'
    assert not Path(
        project.nix("eval", "--raw", f".#{CPU}.objects", "--apply", named).stdout
    ).exists()


def test_the_host_toolchain_builds_object_by_object_too(tmp_path: Path) -> None:
    """Outside the sandbox each step's build folder has its own name: the configured
    tree is moved into it (kernelnix.compile.objects), and the variant passes its checks."""
    url, env = kernelnix_clone(tmp_path, ("2.13-cpu",))
    path = make_project(EXAMPLES / "fused-scale", tmp_path / "host", url, env)
    header = path / "fused_scale_cuda" / "kernels.cuh"  # a header every object reads
    header.write_text(f"{header.read_text()}\n// {uuid.uuid4()}\n")
    flake = path / "flake.nix"
    flake.write_text(
        flake.read_text().replace("path = ./.;", "path = ./.;\n      objectBuild = true;")
    )
    git(path, "add", "-A")
    done = nix(path, env, "build", f".#{CPU}", "-L", "-o", str(path / "result"))
    assert f"ok    {CPU}: no violations" in done.stderr
    assert f"{CPU}-torch_binding.cpp.o> compiled /nix/store/" in done.stderr
    assert (path / "result" / CPU / "metadata.json").is_file()


def test_kernelnix_build_says_how_many_objects_and_reports_each(
    projects: tuple[Project, Project],
) -> None:
    project = projects[0]
    project.build()
    project.edit("fused_scale_cuda/kernels.cu", "reported")
    done = subprocess.run(
        ["kernelnix", "build", str(project.path), "--variant", CUDA],
        env=project.env,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "kernelnix: 1 object to build, on this machine" in done.stderr
    assert re.search(
        r"^\[1/1\] fused_scale_cuda/kernels\.cu \(8\.0 9\.0a\) \d+ s$", done.stderr, re.M
    )
    assert "building '/nix/store/" in done.stderr
    assert "@nix" not in done.stderr
    # Kept from garbage collection: a later edit still compiles one object.
    kept = project.path / "result-objects" / CUDA / "fused_scale_cuda" / "kernels.cu.o"
    assert kept.resolve().name.endswith(f"-fused_scale-{CUDA}-kernels.cu.o")
    deleted = subprocess.run(
        ["nix-store", "--delete", str(kept.resolve())], capture_output=True, text=True
    )
    assert "since it is still alive" in deleted.stderr
