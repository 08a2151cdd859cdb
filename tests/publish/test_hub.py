"""`kernelnix upload` against a fake Hub on 127.0.0.1 (tests/hubserver.py)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from checks_corpus.corpus import build_corpus
from click.testing import CliRunner
from handmade import copy_example, make_variant, plan_metadata
from hubserver import TOKEN, FakeHub, RecordedCommit
from huggingface_hub import HfApi, constants
from paths import ROOT

from kernelnix.checks import CheckOptions
from kernelnix.cli import main
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.emit.card import render_card
from kernelnix.publish.hub import UploadResult, upload
from kernelnix.publish.release import UploadOptions

REPO = "kernelnix-examples/relu-noarch"
MESSAGE = "Uploaded using `kernelnix`."
NO_IMPORT = CheckOptions(import_check=False)
VARIANT_FILES = ["__init__.py", "_ops.py", "metadata.json"]
BENCHMARKS = ["benchmarks/benchmark.py", "benchmarks/benchmark_large.py"]


def build_files(*variants: str) -> list[str]:
    return [f"build/{v}/{f}" for v in variants for f in VARIANT_FILES]


@pytest.fixture
def hub(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    """The fake Hub; huggingface_hub may go online, to it only (loopback)."""
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    with FakeHub() as server:
        monkeypatch.setattr(constants, "ENDPOINT", server.url)
        monkeypatch.setenv("HF_ENDPOINT", server.url)
        monkeypatch.setenv("HF_TOKEN", TOKEN)
        yield server
    assert server.unexpected == []


@pytest.fixture
def api(hub: FakeHub) -> HfApi:
    return HfApi(endpoint=hub.url, token=TOKEN)


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """relu-noarch with two hand-made variants and three files under benchmarks/."""
    root = copy_example("relu-noarch", tmp_path)
    for variant in ("torch-cpu", "torch-cuda"):
        make_variant(root / "build", "relu-noarch", variant)
    (root / "benchmarks").mkdir()
    for name in ("benchmark.py", "benchmark_large.py", "helpers.py"):
        (root / "benchmarks" / name).write_text(f"# {name}\n")
    return root


def run_upload(project: Path, api: HfApi, **options: Any) -> UploadResult:
    dry_run = bool(options.pop("dry_run", False))
    settings = UploadOptions(checks=NO_IMPORT, **options)
    return upload(project, settings, dry_run=dry_run, api=api)


def commit(revision: str, adds: list[str], deletes: tuple[str, ...] = ()) -> RecordedCommit:
    """A plain commit of this kernel's upload, as the fake Hub records it."""
    summary = MESSAGE
    return RecordedCommit(REPO, revision, summary, adds, list(deletes), create_pr=False)


def test_first_upload(project: Path, hub: FakeHub, api: HfApi) -> None:
    result = run_upload(project, api)
    assert result.url == f"{hub.url}/kernels/{REPO}/tree/v1"
    assert sorted(hub.repos) == [("kernel", REPO)]
    assert sorted(hub.repos[("kernel", REPO)].branches) == ["main", "v1"]
    assert hub.commits == [
        commit("v1", BENCHMARKS + build_files("torch-cpu", "torch-cuda")),
        commit("main", ["README.md"]),
    ]
    branch = hub.files("kernel", REPO, "v1")
    assert sorted(branch) == [
        ".gitattributes",
        *BENCHMARKS,
        *build_files("torch-cpu", "torch-cuda"),
    ]
    cpu = project / "build" / "torch-cpu" / "metadata.json"
    assert branch["build/torch-cpu/metadata.json"] == cpu.read_bytes()
    readme = hub.files("kernel", REPO, "main")["README.md"].decode()
    assert readme == render_card(load_config(project))
    prefix = f"/api/kernels/{REPO}"
    assert hub.writes() == [
        ("POST", "/api/repos/create"),
        ("POST", f"{prefix}/branch/v1"),
        ("POST", f"{prefix}/preupload/v1"),
        ("POST", f"{prefix}/commit/v1"),
        ("POST", "/api/validate-yaml"),
        ("POST", f"{prefix}/preupload/main"),
        ("POST", f"{prefix}/commit/main"),
    ]


def test_existing_branch_deletes_stale_files_of_the_uploaded_variants_only(
    project: Path, hub: FakeHub, api: HfApi
) -> None:
    hub.seed(
        "kernel",
        REPO,
        {
            "main": {"README.md": b"old card"},
            "v1": {
                "build/torch-cpu/old.py": b"",
                "build/torch-cpu/_ops.py": b"old",
                "build/torch-rocm/__init__.py": b"",
                "benchmarks/benchmark_old.py": b"",
                "benchmarks/notes.md": b"",
            },
        },
    )
    result = run_upload(project, api)
    assert result.remote.branch_exists
    assert hub.commits[0] == commit(
        "v1",
        BENCHMARKS + build_files("torch-cpu", "torch-cuda"),
        ("benchmarks/benchmark_old.py", "build/torch-cpu/old.py"),
    )
    kept = hub.files("kernel", REPO, "v1")
    assert "build/torch-rocm/__init__.py" in kept and "benchmarks/notes.md" in kept
    assert ("POST", f"/api/kernels/{REPO}/branch/v1") not in hub.writes()


def test_new_branch_deletes_everything_under_build(project: Path, hub: FakeHub, api: HfApi) -> None:
    main_files = {
        "README.md": b"",
        "build/torch-xpu/__init__.py": b"",
        "benchmarks/notes.md": b"",
        "LICENSE": b"",
    }
    hub.seed("kernel", REPO, {"main": main_files, "v0": {}})
    run_upload(project, api)
    assert hub.commits[0].deletes == ["benchmarks/notes.md", "build/torch-xpu/__init__.py"]
    assert sorted(hub.files("kernel", REPO, "v1")) == sorted(
        ["README.md", "LICENSE", *BENCHMARKS, *build_files("torch-cpu", "torch-cuda")]
    )


def test_batches_of_1000_operations(project: Path, hub: FakeHub, api: HfApi) -> None:
    data = project / "build" / "torch-cpu" / "data"
    data.mkdir()
    for i in range(995):
        (data / f"{i:04}.txt").write_text(str(i))
    run_upload(project, api)
    batches = [(c.revision, c.summary, len(c.adds)) for c in hub.commits]
    assert batches == [
        ("v1", "Uploaded using `kernelnix` (batch 1/2).", 1000),
        ("v1", "Uploaded using `kernelnix` (batch 2/2).", 3),
        ("main", MESSAGE, 1),
    ]
    assert len(hub.files("kernel", REPO, "v1")) == 1 + 1003


def test_create_pr_leaves_the_branches_alone(project: Path, hub: FakeHub, api: HfApi) -> None:
    run_upload(project, api, create_pr=True)
    assert [(c.revision, c.create_pr) for c in hub.commits] == [("v1", True), ("main", True)]
    repo = hub.repos[("kernel", REPO)]
    assert sorted(repo.branches["v1"].files) == [".gitattributes"]
    assert sorted(repo.pull_requests) == ["refs/pr/1", "refs/pr/2"]
    assert "build/torch-cpu/_ops.py" in repo.pull_requests["refs/pr/1"].files


def test_create_pr_collects_batches_in_one_pull_request(
    project: Path, hub: FakeHub, api: HfApi
) -> None:
    data = project / "build" / "torch-cpu" / "data"
    data.mkdir()
    for i in range(1000):
        (data / f"{i:04}.txt").write_text(str(i))
    run_upload(project, api, create_pr=True)
    assert [(c.revision, c.create_pr) for c in hub.commits] == [
        ("v1", True),
        ("refs/pr/1", False),
        ("main", True),
    ]


@pytest.mark.parametrize(
    ("options", "toml_extra", "expected"),
    [
        ({}, "", "v1"),
        ({}, 'branch = "stable"\n', "stable"),
        ({"branch": "testing"}, 'branch = "stable"\n', "testing"),
    ],
)
def test_branch(
    project: Path, api: HfApi, options: dict[str, str], toml_extra: str, expected: str
) -> None:
    toml = project / "build.toml"
    hub_line = f'repo-id = "{REPO}"\n'
    toml.write_text(toml.read_text().replace(hub_line, hub_line + toml_extra))
    result = run_upload(project, api, dry_run=True, **options)
    assert result.release.branch == expected


def test_variants_of_different_versions(project: Path, api: HfApi) -> None:
    path = project / "build" / "torch-cuda" / "metadata.json"
    path.write_text(path.read_text().replace('"version": 1', '"version": 2'))
    with pytest.raises(UserError) as error:
        run_upload(project, api, dry_run=True)
    assert "Found multiple versions in build variants: 1, 2" in error.value.render()
    assert run_upload(project, api, dry_run=True, branch="v2").release.branch == "v2"


def test_repo_id(project: Path, hub: FakeHub, api: HfApi) -> None:
    run_upload(project, api, repo_id="someone/else", repo_type="model", private=True)
    assert sorted(hub.repos) == [("model", "someone/else")]
    assert hub.repos[("model", "someone/else")].private
    assert "build/torch-cpu/_ops.py" in hub.files("model", "someone/else", "v1")
    toml = project / "build.toml"
    toml.write_text(toml.read_text().replace(f'[general.hub]\nrepo-id = "{REPO}"\n', ""))
    with pytest.raises(UserError) as error:
        run_upload(project, api)
    (problem,) = error.value.diagnostics
    assert problem.message == "No `general.hub.repo-id` in build.toml. Use --repo-id to specify it."
    assert problem.key == "general.hub.repo-id"


def test_a_built_card_is_published_as_is(project: Path, hub: FakeHub, api: HfApi) -> None:
    (project / "build" / "CARD.md").write_text("# the built card\n")
    run_upload(project, api)
    assert hub.files("kernel", REPO, "main")["README.md"] == b"# the built card\n"


def test_dry_run_sends_nothing(project: Path, hub: FakeHub) -> None:
    result = CliRunner().invoke(main, ["upload", "--dry-run", "--no-import", str(project)])
    assert result.exit_code == 0, result.output
    assert hub.writes() == []
    assert hub.repos == {}
    lines = result.output.splitlines()
    assert f"2 variant(s) for {REPO}, branch v1" in lines
    assert "checked under the publishing policy (kernel):" in lines
    assert "  torch-cpu: ok under policy kernel, 3 files, import not checked; " in "\n".join(lines)
    assert "commit to v1: 8 operation(s)" in lines
    assert any(line.startswith("  add    build/torch-cpu/_ops.py  (") for line in lines)
    assert "  add    README.md  (rendered card)" in lines
    assert lines[-1] == f"dry run: nothing was sent to {hub.url}/kernels/{REPO}/tree/v1"
    assert hub.requests == []  # not even read


def test_output_json_and_quiet(project: Path, hub: FakeHub, tmp_path: Path) -> None:
    summary = tmp_path / "upload.json"
    args = ["upload", "-q", "--no-import", "--output-json", str(summary), str(project)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    written = json.loads(summary.read_text())
    checks = written.pop("checks")
    assert sorted(checks) == ["torch-cpu", "torch-cuda"]
    assert checks["torch-cpu"]["settings"]["policy-reason"].startswith("the publishing policy")
    heads = {name: ref.head for name, ref in hub.repos[("kernel", REPO)].branches.items()}
    assert written == {
        "repo-id": REPO,
        "branch": "v1",
        "new-branch": True,
        "remote-read": True,
        "url": f"{hub.url}/kernels/{REPO}/tree/v1",
        "dry-run": False,
        "variants": ["torch-cpu", "torch-cuda"],
        "commits": [
            {
                "branch": branch,
                "message": MESSAGE,
                "operations": operations,
                "oid": heads[branch],
                "url": f"{hub.url}/kernels/{REPO}/commit/{heads[branch]}",
                "pull-request": None,
            }
            for branch, operations in (("v1", 8), ("main", 1))
        ],
    }


def test_output_json_of_pull_requests_and_dry_runs(
    project: Path, hub: FakeHub, tmp_path: Path
) -> None:
    summary = tmp_path / "upload.json"
    args = ["upload", "--no-import", "--output-json", str(summary), str(project)]
    assert CliRunner().invoke(main, [*args, "--dry-run"]).exit_code == 0
    planned = json.loads(summary.read_text())
    assert planned["dry-run"] is True
    assert (planned["remote-read"], planned["new-branch"]) == (False, None)
    assert planned["checks"]["torch-cpu"]["settings"]["policy"] == "kernel"
    assert [(c["oid"], c["url"]) for c in planned["commits"]] == [(None, None), (None, None)]
    assert CliRunner().invoke(main, [*args, "--create-pr"]).exit_code == 0
    opened = [c["pull-request"] for c in json.loads(summary.read_text())["commits"]]
    assert opened == [f"{hub.url}/kernels/{REPO}/discussions/{n}" for n in (1, 2)]


def test_dry_run_reads_nothing_and_says_so(project: Path, hub: FakeHub) -> None:
    hub.seed("kernel", REPO, {"main": {}, "v1": {"build/torch-cpu/old.py": b""}})
    result = CliRunner().invoke(main, ["upload", "--dry-run", "--no-import", str(project)])
    assert result.exit_code == 0, result.output
    assert not any(line.startswith("  delete") for line in result.output.splitlines())
    assert "the Hub was not contacted: whether the branch exists" in result.output
    assert hub.requests == []


def test_dry_run_works_with_the_network_off(project: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.delenv("HF_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["upload", "--dry-run", "--no-import", str(project)])
    assert result.exit_code == 0, result.output
    assert result.output.splitlines()[-1] == (
        f"dry run: nothing was sent to http://127.0.0.1:9/kernels/{REPO}/tree/v1"
    )


def break_ops(project: Path) -> str:
    (project / "build" / "torch-cuda" / "_ops.py").unlink()
    return "build/torch-cuda/_ops.py: layout: _ops.py: missing"


def break_metadata(project: Path) -> str:
    path = project / "build" / "torch-cpu" / "metadata.json"
    path.write_text(path.read_text().replace('"python-depends"', '"python-dependencies"'))
    return "build/torch-cpu/metadata.json: python-depends: required key is missing"


def stale_digest(project: Path) -> str:
    variant = project / "build" / "torch-cpu"
    assert CliRunner().invoke(main, ["hash", str(variant)]).exit_code == 0
    (variant / "__init__.py").write_text("# edited after hashing\n")
    return "torch-cpu/metadata.json: digest: __init__.py: hash differs from the digest"


def development_build(project: Path) -> str:
    path = project / "build" / "torch-cpu" / "metadata.json"
    metadata = json.loads(path.read_text())
    metadata["provenance"]["kernelnix"] = {
        "toolchain": "host",
        "redistributable": False,
        "development-archs": ["9.0"],
    }
    path.write_text(json.dumps(metadata))
    return "provenance.kernelnix.development-archs: a development build"


@pytest.mark.parametrize("damage", [break_ops, break_metadata, stale_digest, development_build])
def test_refuses_variants_that_fail_the_checks(
    project: Path, hub: FakeHub, damage: Callable[[Path], str]
) -> None:
    expected = damage(project)
    result = CliRunner().invoke(main, ["upload", "--no-import", str(project)])
    assert result.exit_code == 2, result.output
    assert expected in result.output
    assert "Traceback" not in result.output
    assert hub.requests == []


def test_a_host_built_noarch_variant_is_published_with_its_provenance(
    project: Path, hub: FakeHub, api: HfApi
) -> None:
    path = project / "build" / "torch-cpu" / "metadata.json"
    metadata = json.loads(path.read_text())
    metadata["provenance"]["kernelnix"] = {
        "toolchain": "host",
        "redistributable": False,
        "policy": "manylinux_2_36",
    }
    path.write_text(json.dumps(metadata))
    result = run_upload(project, api)
    assert [c.revision for c in hub.commits] == ["v1", "main"]
    checked = {c.path.name: c for c in result.release.checked}
    assert (
        checked["torch-cpu"]
        .describe()
        .endswith("built with the host toolchain, which checked it under manylinux_2_36")
    )
    assert checked["torch-cpu"].report.settings["policy"] == "kernel"


def native_variant(project: Path, library: str, provenance: dict[str, Any]) -> tuple[str, str]:
    """build/ holds torch-cpu and a hand-made native CPU variant of relu whose library
    is the checks corpus case `library`; (its name, the library's file name)."""
    (project / "build" / "torch-cuda").rename(project / "elsewhere")
    name = "torch213-cxx11-cpu-x86_64-linux"
    metadata = plan_metadata("relu", name)
    metadata["provenance"]["kernelnix"] = provenance
    file = f"{metadata['id']}.abi3.so"
    files = {file: build_corpus().path(library).read_bytes()}
    make_variant(project / "build", "relu", name, files=files, metadata=metadata)
    return name, file


def test_a_native_host_build_that_passes_the_publishing_policy_is_published(
    project: Path, hub: FakeHub, api: HfApi
) -> None:
    """Whoever built it: a host build whose library meets the publishing policy (a
    C library of the checks corpus, glibc <= 2.27, no libstdc++) is published."""
    host = {"toolchain": "host", "redistributable": False, "policy": "manylinux_2_36"}
    name, file = native_variant(project, "clean_c", host)
    result = run_upload(project, api)
    checked = {c.path.name: c for c in result.release.checked}
    assert checked[name].report.settings["policy"] == "kernel"
    assert "built with the host toolchain, which checked it under manylinux_2_36" in (
        checked[name].describe()
    )
    assert f"build/{name}/{file}" in hub.files("kernel", REPO, "v1")


def test_a_native_variant_is_refused_with_the_violations_of_the_publishing_policy(
    project: Path, hub: FakeHub
) -> None:
    hermetic = {"toolchain": "hermetic", "redistributable": True, "policy": "kernel"}
    native_variant(project, "dynamic_cxx", hermetic)
    result = CliRunner().invoke(main, ["upload", "--no-import", str(project)])
    assert result.exit_code == 2, result.output
    assert "needed-library: libstdc++.so.6" in result.output
    assert "(policy kernel)" in result.output
    assert "-Wl,--exclude-libs,ALL" in result.output  # the fix
    assert hub.requests == []


def test_refuses_metadata_the_loader_cannot_parse(project: Path, hub: FakeHub) -> None:
    pytest.importorskip("kernels._rust")
    path = project / "build" / "torch-cpu" / "metadata.json"
    path.write_text(path.read_text().replace('"version": 1', '"version": "1"'))
    result = CliRunner().invoke(main, ["upload", "--no-import", str(project)])
    assert result.exit_code == 2
    # Our strict metadata model refuses it before the loader's parser is consulted.
    assert "torch-cpu/metadata.json: version" in result.output
    assert hub.requests == []


def test_dirty_tree_warns(project: Path, hub: FakeHub, api: HfApi) -> None:
    path = project / "build" / "torch-cpu" / "metadata.json"
    metadata = plan_metadata("relu-noarch", "torch-cpu")
    metadata["provenance"]["kernel"] = {"commit": "a" * 40, "dirty": True}
    path.write_text(json.dumps(metadata))
    result = run_upload(project, api)
    (warning,) = result.release.warnings
    assert warning.severity == "warning" and "uncommitted changes" in warning.message
    assert len(hub.commits) == 2


def test_real_upload_needs_a_token(
    project: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.delenv("HF_TOKEN")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
    result = CliRunner().invoke(main, ["upload", "--no-import", str(project)])
    assert result.exit_code == 2
    assert "not logged in to the Hugging Face Hub" in result.output
    assert hub.requests == []


def test_hub_refusal_is_exit_1(
    project: Path, hub: FakeHub, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_TOKEN", "hf_wrong_token")
    result = CliRunner().invoke(main, ["upload", "--no-import", str(project)])
    assert result.exit_code == 1
    assert result.output.startswith(f"error: cannot create the repository {REPO}: ")
    assert "Traceback" not in result.output


def test_cli_end_to_end_with_every_check(project: Path, hub: FakeHub, tmp_path: Path) -> None:
    """`kernelnix upload` in a fresh interpreter, configured only by the environment."""
    env = {
        **os.environ,
        "HF_ENDPOINT": hub.url,
        "HF_HUB_OFFLINE": "0",
        "HF_TOKEN": TOKEN,
        "HF_HOME": str(tmp_path / "hf-home"),
        "PYTHONPATH": str(ROOT),
    }
    done = subprocess.run(
        [sys.executable, "-m", "kernelnix", "upload", str(project)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines()[-1] == f"uploaded: {hub.url}/kernels/{REPO}/tree/v1"
    assert [c.revision for c in hub.commits] == ["v1", "main"]
