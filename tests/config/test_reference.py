"""Compatibility with the reference build.toml parser bundled in the `kernels` package.

`kernels._rust.Build.open(dir)` is upstream kernel-builder's parser (Rust). It
exposes `general.backends` and `all_kernel_depends(backend)` (general plus
backend-specific kernel dependencies); kernel sections are not exposed.

Rules checked here:
- a file the reference accepts, kernelnix accepts, with the same backends and the
  same kernel dependencies for every backend;
- a file the reference rejects, kernelnix rejects too, unless it is one of the
  documented deliberate differences below (docs/build-toml.md), each of which is
  checked to still be a difference.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from paths import ROOT, TESTS

from kernelnix.config import BuildConfig, load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.variant_metadata import kernel_depends_for

reference = pytest.importorskip(
    "kernels._rust", reason="the `kernels` package is a test dependency"
)

DATA = TESTS / "data" / "configs"

EXAMPLES = sorted(p.parent for p in (ROOT / "examples").glob("*/build.toml"))
GOOD = sorted(p.parent for p in (DATA / "good").glob("*/build.toml"))
BAD = sorted(p.parent for p in (DATA / "bad").glob("*/build.toml"))

# kernelnix accepts these; the reference rejects them (a message fragment of its error).
EXTENSIONS = {
    "v3-with-license": "unsupported legacy format",  # v3 files load when they have a license
    "v3-torch": "unsupported legacy format",
    "noarch-kebab-case": "Unknown field cuda-capabilities",  # the documented spelling
}
# kernelnix rejects these; the reference accepts them (it checks archs only at build time).
STRICTER = {"bad-cuda-capabilities", "bad-rocm-archs"}

KernelDeps = list[tuple[str, str, object]]


def reference_open(directory: Path) -> object | str:
    """The reference's Build, or its error message."""
    try:
        return reference.Build.open(str(directory))
    except ValueError as exc:
        return str(exc)


def reference_kernel_depends(build: object, backend: object) -> KernelDeps:
    out: KernelDeps = []
    for dep in build.all_kernel_depends(backend):  # type: ignore[attr-defined]
        version = dep.version
        if isinstance(version, reference.KernelVersion.Version):
            out.append((dep.repo_id, "version", version.version))
        else:
            out.append((dep.repo_id, "revision", version.revision))
    return out


def our_kernel_depends(config: BuildConfig, backend: str) -> KernelDeps:
    """What kernelnix writes to metadata.json's kernel dependencies for `backend`."""
    return [
        (d.repo_id, "version", d.version)
        if d.version is not None
        else (d.repo_id, "revision", d.revision)
        for d in kernel_depends_for(config, backend)
    ]


def ours(directory: Path) -> BuildConfig | UserError:
    try:
        return load_config(directory).config
    except UserError as exc:
        return exc


def assert_same_meaning(directory: Path, build: object, config: BuildConfig) -> None:
    backends = [str(b) for b in build.general.backends]  # type: ignore[attr-defined]
    assert backends == list(config.general.backends), directory
    for backend in build.general.backends:  # type: ignore[attr-defined]
        assert reference_kernel_depends(build, backend) == our_kernel_depends(
            config, str(backend)
        ), (directory, backend)


@pytest.mark.parametrize("directory", EXAMPLES + GOOD, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_accepted_by_reference_means_accepted_by_us(directory: Path) -> None:
    build = reference_open(directory)
    config = ours(directory)
    assert not isinstance(config, UserError), config.render()
    if isinstance(build, str):
        # Only a documented extension may be rejected by the reference.
        assert directory.name in EXTENSIONS and directory.parent.name == "good", build
        assert EXTENSIONS[directory.name] in build
        return
    assert directory.name not in EXTENSIONS, "not an extension any more: update the docs"
    assert_same_meaning(directory, build, config)


@pytest.mark.parametrize("directory", BAD, ids=lambda p: p.name)
def test_rejected_by_reference_means_rejected_by_us(directory: Path) -> None:
    assert isinstance(ours(directory), UserError)
    build = reference_open(directory)
    # The reference rejects every bad case except those kernelnix checks more strictly.
    assert isinstance(build, str) == (directory.name not in STRICTER), directory.name


def test_the_corpus_covers_reference_features() -> None:
    """The good corpus exercises kernel dependencies of every kind the reference knows."""
    builds = [b for b in map(reference_open, GOOD) if not isinstance(b, str)]
    kinds = {
        kind
        for build in builds
        for backend in build.general.backends  # type: ignore[attr-defined]
        for _, kind, _ in reference_kernel_depends(build, backend)
    }
    assert kinds == {"version", "revision"}


# Snippets on the edges found while comparing the two parsers: both must agree.
HEAD = '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
AGREEMENT = {
    "cuda minver 12.0": (
        HEAD + 'backends = ["cuda"]\n[general.cuda]\nminver = "12.0"\n[torch]\n',
        True,
    ),
    "cuda minver 12": (
        HEAD + 'backends = ["cuda"]\n[general.cuda]\nminver = "12"\n[torch]\n',
        False,
    ),
    "cuda maxver 12.8.1": (
        HEAD + 'backends = ["cuda"]\n[general.cuda]\nmaxver = "12.8.1"\n[torch]\n',
        False,
    ),
    "torch minver 2.9.1": (HEAD + 'backends = ["cuda"]\n[torch]\nminver = "2.9.1"\n', False),
    "kernel cuda-minver 12": (
        HEAD
        + 'backends = ["cuda"]\n[torch]\n[kernel.k]\nbackend = "cuda"\ndepends = []\nsrc = []\n'
        + 'cuda-minver = "12"\n',
        False,
    ),
    "stable-abi 2.11.0": (HEAD + 'backends = ["cuda"]\n[torch]\nstable-abi = "2.11.0"\n', False),
    "stable-abi 2.0": (HEAD + 'backends = ["cuda"]\n[torch]\nstable-abi = "2.0"\n', True),
    "stable-abi table 2": (
        HEAD + 'backends = ["cuda"]\n[torch]\nstable-abi = { cuda = "2" }\n',
        False,
    ),
    "stable-abi extra backend": (
        HEAD + 'backends = ["cuda"]\n[torch]\nstable-abi = { cuda = "2.11", cpu = "2.12" }\n',
        True,
    ),
    "snake case general key": (HEAD + 'backends = ["cuda"]\npython_depends = []\n[torch]\n', False),
    "snake case framework": (HEAD + 'backends = ["cuda"]\n[torch]\n[tvm_ffi]\nsrc = []\n', False),
    "snake case kernel key": (
        HEAD
        + 'backends = ["cuda"]\n[torch]\n[kernel.k]\nbackend = "cuda"\ndepends = []\nsrc = []\n'
        + 'cuda_flags = ["-O3"]\n',
        False,
    ),
    "url without path": (
        HEAD + 'upstream = "https://github.com/"\nbackends = ["cuda"]\n[torch]\n',
        True,
    ),
    "scp url empty user": (
        HEAD + 'upstream = "@host:org/repo"\nbackends = ["cuda"]\n[torch]\n',
        True,
    ),
    "scp url space in path": (
        HEAD + 'upstream = "git@host:org/my repo"\nbackends = ["cuda"]\n[torch]\n',
        True,
    ),
    "scp url without user": (
        HEAD + 'upstream = "host:org/repo"\nbackends = ["cuda"]\n[torch]\n',
        False,
    ),
    "byte-order mark": ("\ufeff" + HEAD + 'backends = ["cuda"]\n[torch]\n', True),
    "empty backends": (HEAD + "backends = []\n[torch-noarch]\n", True),
    "torch without src": (HEAD + 'backends = ["cuda"]\n[torch]\n', True),
    "v4 with tpu table": (
        HEAD.replace("edition = 5\n", "") + 'backends = ["tpu"]\n[general.tpu]\n[torch]\n',
        False,
    ),
}


@pytest.mark.parametrize("name", sorted(AGREEMENT))
def test_both_parsers_agree_on_edge_cases(name: str) -> None:
    text, accepted = AGREEMENT[name]
    with tempfile.TemporaryDirectory() as tmp:
        directory = Path(tmp)
        (directory / "build.toml").write_bytes(text.encode("utf-8"))
        build = reference_open(directory)
        config = ours(directory)
        assert (not isinstance(build, str)) == accepted, build
        assert (not isinstance(config, UserError)) == accepted, name
        if accepted:
            assert isinstance(config, BuildConfig)
            assert_same_meaning(directory, build, config)
    assert not os.path.exists(tmp)
