"""`kernelnix reproduce` end to end: relu's CPU variant built by real Nix with the
default, hermetic toolchain in the sandbox, compared with the same variant built
earlier and hashed with `kernelnix hash`, as a bundle directory and as a kernel
repository served by the fake Hub (tests/support/hubserver.py) at a revision,
downloaded by the real huggingface_hub: identical; then with one byte of its
library changed. The rebuild is always a build on this machine: a binary cache
on 127.0.0.1 that serves an altered copy of the variant (matching an altered
reference) is never used, and a copy already in the store is built again and
compared with `nix-store --check`.

The kernelnix clone's wheel lock keeps Torch 2.13's CPU build set.
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
from nix_projects import kernelnix_clone, make_project, nix
from nix_remote import cache_entry, serve_directory
from paths import EXAMPLES

from kernelnix.checks.elf import read_sections
from kernelnix.project.nix import FlakeProject, sandbox_options

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]

SANDBOX = ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false")
HERMETIC = ("--toolchain", "hermetic", "--no-host-record")


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
    url, env = kernelnix_clone(work, ("2.13-cpu",))
    project = make_project(EXAMPLES / "relu", work / "relu", url, env, HERMETIC)
    cpu = "torch213-cxx11-cpu-x86_64-linux"
    assert cpu in json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)
    nix(project, env, "build", f".#{cpu}", "--out-link", str(work / "earlier"), *SANDBOX)
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


def rebuilt_lines(checked: int) -> list[str]:
    lines = ["rebuilt from source on this machine: 1 variant derivation, none substituted"]
    if checked:
        lines.append(
            "  1 already in the Nix store, built again and compared with that copy "
            "(nix-store --check)"
        )
    return lines


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
    # Built in the store already: built again in the sandbox and compared with it.
    check = next(line for line in done.stderr.splitlines() if "--check" in line)
    assert check.startswith("+ ") and "--option sandbox true" in check, done.stderr
    assert rebuilt_lines(checked=1) == done.stdout.splitlines()[-3:-1], done.stdout
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


def nix_store(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["nix-store", *args], env=env, capture_output=True, text=True)


def test_a_cache_serving_an_altered_variant_is_never_what_reproduce_compares(
    relu_cpu: Built, tmp_path: Path
) -> None:
    """A binary cache on 127.0.0.1 that Nix trusts serves relu's CPU variant with one
    byte of its library changed, and the reference was changed the same way: a
    plain `nix build` would fetch that copy, and a comparison of it would say
    "identical". reproduce builds the variant here instead (substitution off) and
    names the changed library; then, with the altered copy already valid in the
    store, it builds the variant again (`nix-store --check`), says the store's copy
    is not this source's build, and names the library again."""
    project, cpu = relu_cpu.project, relu_cpu.variant
    output = nix(project, relu_cpu.env, "eval", "--raw", f".#{cpu}.outPath").stdout
    altered = published_copy(relu_cpu, tmp_path / "altered")
    (library,) = (altered / cpu).glob("*.so")
    change_a_byte_of_rodata(library)
    # The cache's copy is the altered variant, under the derivation's own store path.
    tree = writable_copy(Path(output), tmp_path / "tree")
    shutil.copyfile(library, tree / cpu / library.name)
    cache_entry(tmp_path / "cache", output, tree)
    assert nix_store(relu_cpu.env, "--delete", "--ignore-liveness", output).returncode == 0
    try:
        with serve_directory(tmp_path / "cache") as cache:
            env = dict(relu_cpu.env)
            env["NIX_CONFIG"] += f"\nsubstituters = {cache.url}\nrequire-sigs = false"
            plain = nix(project, env, "build", f".#{cpu}", "--dry-run", *SANDBOX)
            assert "will be fetched" in plain.stderr and output in plain.stderr, plain.stderr

            options = ("--variant", cpu, "--against", str(altered))
            done = kernelnix(env, "reproduce", str(project), *options)
            assert done.returncode == 1, done.stdout + done.stderr
            assert done.stdout.splitlines()[0] == f"{cpu}: differs", done.stdout
            assert f"  {library.name}: ELF sections differ: .rodata" in done.stdout
            assert rebuilt_lines(checked=0) == done.stdout.splitlines()[-2:-1], done.stdout
            assert not [r for r in cache.requests if r.endswith(".nar")], cache.requests

            # The altered copy made valid in the store, as a build that trusted the cache would.
            assert nix_store(env, "--delete", "--ignore-liveness", output).returncode == 0
            assert nix_store(env, "--realise", output).returncode == 0
            assert [r for r in cache.requests if r.endswith(".nar")]
            done = kernelnix(env, "reproduce", str(project), *options)
            assert done.returncode == 1, done.stdout + done.stderr
            assert f"  {library.name}: ELF sections differ: .rodata" in done.stdout
            assert (
                f"  {cpu}: the store's copy differs from this rebuild: it was not built from "
                "this source"
            ) in done.stdout, done.stdout
    finally:
        # Nothing altered stays in the store for later tests.
        nix_store(relu_cpu.env, "--delete", "--ignore-liveness", output)


def git(cwd: Path, *args: str) -> str:
    identity = ["-c", "user.name=kernelnix-tests", "-c", "user.email=tests@kernelnix.invalid"]
    done = subprocess.run(["git", *identity, *args], cwd=cwd, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_a_published_kernel_is_rebuilt_from_the_source_its_provenance_names(
    tmp_path: Path,
) -> None:
    """The publisher's way: a clean commit of relu, its flake.lock committed, pushed
    to a git repository (file://); `nix build .#bundle` in the sandbox records each
    variant's build provenance; `kernelnix hash` in the checkout adds the
    repository's URL; the variants go to the (fake) Hub. `kernelnix check` holds
    the provenance to the files and the real loader loads the variant. Given only
    the Hub repository, reproduce fetches that commit with git, builds it with the
    kernelnix its flake.lock pins, and finds it identical; with one byte changed on
    the Hub it names the file; a variant built from a dirty work tree is refused."""
    url, env = kernelnix_clone(tmp_path, ("2.13-cpu",))
    project = make_project(EXAMPLES / "relu", tmp_path / "relu", url, env, HERMETIC)
    nix(project, env, "flake", "lock")
    git(project, "add", "-A")
    git(project, "commit", "-q", "-m", "relu")
    origin = tmp_path / "origin.git"
    git(tmp_path, "init", "-q", "--bare", str(origin))
    git(project, "remote", "add", "origin", f"file://{origin}")
    git(project, "push", "-q", "origin", "HEAD:refs/heads/main")
    commit = git(project, "rev-parse", "HEAD")
    nix(project, env, "build", ".#bundle", "-o", str(tmp_path / "bundle"), *SANDBOX)
    cpu = "torch213-cxx11-cpu-x86_64-linux"
    published = writable_copy(tmp_path / "bundle", project / "build")
    assert kernelnix(env, "hash", str(published)).returncode == 0
    metadata = json.loads((published / cpu / "metadata.json").read_text())
    source = metadata["provenance"]["slsa"]["predicate"]["buildDefinition"]["externalParameters"]
    assert source["source"] == {
        "uri": f"file://{origin}",
        "digest": {"gitCommit": commit},
        "dirty": False,
    }
    checked = kernelnix(env, "check", str(published / cpu))
    assert checked.returncode == 0 and "import]" in checked.stdout, checked.stdout
    assert "import check skipped" not in checked.stdout

    identical = repository_files(published)
    (library,) = (published / cpu).glob("*.so")
    change_a_byte_of_rodata(library)
    patched = repository_files(published)
    metadata["provenance"]["slsa"]["predicate"]["buildDefinition"]["externalParameters"]["source"][
        "dirty"
    ] = True
    dirty = {**identical, f"build/{cpu}/metadata.json": json.dumps(metadata).encode()}
    with FakeHub(lifetime=900) as hub:
        hub.seed("kernel", REPO, {"main": {}, "v1": identical, "v2": patched, "v3": dirty})
        hub_env = {key: value for key, value in env.items() if key != "HF_HUB_OFFLINE"}
        hub_env |= {"HF_ENDPOINT": hub.url, "HF_HUB_CACHE": str(tmp_path / "hub-cache")}

        def from_the_hub(revision: str) -> subprocess.CompletedProcess[str]:
            return kernelnix(hub_env, "reproduce", REPO, "--revision", revision)

        done = from_the_hub("v1")
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[:2] == identical_lines(cpu, published)
        assert f"source: file://{origin} at {commit}" in done.stdout
        assert f"git clone --quiet --no-checkout file://{origin}" in done.stderr

        done = from_the_hub("v2")
        assert done.returncode == 1, done.stdout + done.stderr
        assert done.stdout.splitlines()[:2] == differing_lines(cpu, library)

        done = from_the_hub("v3")
        assert done.returncode == 2, done.stdout + done.stderr
        assert (
            f"{REPO}'s variant {cpu} was built from a work tree with uncommitted changes"
        ) in done.stderr
        assert "git clone" not in done.stderr and "Traceback" not in done.stderr


# A package of the registry Python's tree: dropping it costs that tree and the
# registry Python rebuilt (about half a minute), nothing else of the toolchain.
DROPPED = "libuuid1"


def fixed_path(name: str, sha256: str) -> str:
    done = nix_store({}, "--print-fixed-path", "sha256", sha256, name)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_an_archive_keeps_a_kernel_buildable_after_the_pool_drops_a_package(
    tmp_path: Path,
) -> None:
    """Debian's pool, served on 127.0.0.1, answers 404 for a locked .deb. With the
    package gone from the store too (as on a new machine: the registry Python's
    tree and what it built removed), `kernelnix build` without an archive ends in
    the one clear error naming the package and the fix; with `kernelnix archive`'s
    cache named by --archive, the build takes the package from it and relu's CPU
    variant comes out with the same NAR hash as before; so does `reproduce`."""
    url, env = kernelnix_clone(tmp_path, ("2.13-cpu",))
    clone = tmp_path / "kernelnix"
    lock_file = clone / "kernelnix" / "data" / "toolchain-lock.json"
    lock = json.loads(lock_file.read_text())
    debs = lock["systems"]["x86_64-linux"]["debs"]
    pool = tmp_path / "pool"
    pool.mkdir()
    for name, deb in debs.items():
        if name != DROPPED:
            shutil.copyfile(fixed_path(f"{name}.deb", deb["sha256"]), pool / f"{name}.deb")
    # The toolchain's prefetch reads the locks of the kernelnix the flake pins (the
    # clone's, naming the pool), into a cache of the test's own.
    env = {**env, "KERNELNIX_CACHE": str(tmp_path / "cache")}

    def kernelnix_here(*args: str) -> subprocess.CompletedProcess[str]:
        return kernelnix(env, *args)

    with serve_directory(pool) as served:
        for name, deb in debs.items():
            deb["url"] = f"{served.url}/{name}.deb"
        lock_file.write_text(json.dumps(lock, indent=1) + "\n")
        git(clone, "commit", "-q", "-am", "the pool on 127.0.0.1")
        project = make_project(EXAMPLES / "relu", tmp_path / "relu", url, env, HERMETIC)
        cpu = "torch213-cxx11-cpu-x86_64-linux"
        built = kernelnix_here("build", str(project), "--variant", cpu)
        assert built.returncode == 0, built.stderr
        output = (project / "result").resolve()
        before = nar_hash(env, output)
        published = published_copy(Built(project, env, cpu, project / "result"), tmp_path / "pub")
        archive = f"file://{tmp_path / 'archive'}"
        archived = kernelnix_here("archive", "--to", f"{archive}?compression=none", str(project))
        assert archived.returncode == 0, archived.stderr
        dropped = Path(fixed_path(f"{DROPPED}.deb", debs[DROPPED]["sha256"])).name
        assert f"archived {dropped}" in archived.stdout
        # The same into an HTTP server that takes uploads.
        (tmp_path / "uploads").mkdir()
        with serve_directory(tmp_path / "uploads") as uploads:
            sent = kernelnix_here(
                "archive", "--to", f"{uploads.url}?compression=none", str(project)
            )
            assert sent.returncode == 0, sent.stderr
        narinfo = tmp_path / "uploads" / f"{dropped.split('-', 1)[0]}.narinfo"
        assert "CA: fixed:sha256:" in narinfo.read_text()

        def drop() -> None:
            """The package, the Python tree made of it, and what refers to them, gone."""
            drv = nix(project, env, "eval", "--raw", f".#{cpu}.drvPath").stdout
            shown = json.loads(nix(project, env, "show-derivation", "-r", drv).stdout)
            names = {f"{DROPPED}.deb", "python-3.11", "python-3.11-kernelnix"}
            paths = [
                d["outputs"]["out"]["path"] for d in shown.values() if d["env"].get("name") in names
            ] + [str(output)]
            referrers = nix_store(env, "--query", "--referrers-closure", *paths).stdout.split()
            (project / "result").unlink(missing_ok=True)
            gone = nix_store(env, "--delete", "--ignore-liveness", *referrers)
            assert gone.returncode == 0, gone.stderr

        drop()
        refused = kernelnix_here("build", str(project), "--variant", cpu)
        assert refused.returncode == 2, refused.stderr
        assert (
            f"error: the Debian package {DROPPED} {debs[DROPPED]['version']} (amd64) is gone from "
            f"{served.url}/{DROPPED}.deb (HTTP 404)"
        ) in refused.stderr
        assert "or name an archive of the build's downloads" in refused.stderr

        options = ("--archive", archive)
        built = kernelnix_here("build", str(project), "--variant", cpu, *options)
        assert built.returncode == 0, built.stderr
        assert nar_hash(env, (project / "result").resolve()) == before

        drop()
        done = kernelnix_here(
            "reproduce", str(project), "--variant", cpu, "--against", str(published), *options
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert done.stdout.splitlines()[0] == f"{cpu}: identical"
    assert f"/{DROPPED}.deb" in " ".join(served.requests)


def nar_hash(env: dict[str, str], path: Path) -> str:
    done = subprocess.run(
        ["nix", "path-info", "--json", str(path)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr
    return str(json.loads(done.stdout)[0]["narHash"])


@pytest.mark.parametrize(
    ("toolchain", "options"), [("host", ()), ("hermetic", ("--option", "sandbox", "true"))]
)
def test_the_sandbox_is_on_for_the_hermetic_toolchain_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, toolchain: str, options: tuple[str, ...]
) -> None:
    url, env = kernelnix_clone(tmp_path, ("2.13-cpu",))
    project = make_project(
        EXAMPLES / "relu", tmp_path / "relu", url, env, ("--toolchain", toolchain)
    )
    monkeypatch.setenv("NIX_CONFIG", env["NIX_CONFIG"])
    assert sandbox_options(FlakeProject(project), "bundle") == options
