"""The kernel dependencies the plan gives each variant (kernelnix.plan.kernel_deps),
from real build.toml files and lock files written by kernelnix.plan.kernel_lock."""

from __future__ import annotations

from pathlib import Path

import pytest
from handmade import kernel_depending_on

from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.kernel_lock import (
    FILES_LOCK_NAME,
    LOCK_NAME,
    FilesLock,
    KernelFiles,
    LockedKernel,
    VariantFiles,
    read_files_lock,
    write_files_lock,
    write_lock,
)
from kernelnix.plan.model import PlanKernelDeps

ENDPOINT = "http://127.0.0.1:9"
B, C = "b" * 40, "c" * 40
SHA = "0" * 64


def kernel(tmp_path: Path) -> Path:
    return kernel_depending_on(tmp_path, "org/b")


def lock(directory: Path, locks: list[LockedKernel], kernels: list[KernelFiles]) -> None:
    write_lock(directory / LOCK_NAME, locks)
    write_files_lock(directory / FILES_LOCK_NAME, FilesLock(ENDPOINT, tuple(kernels)))


def deps_of(directory: Path) -> PlanKernelDeps:
    plan = build_plan(load_config(directory), PlanOptions(systems=("x86_64-linux",)))
    deps = plan.variants["x86_64-linux"]["torch-cpu"].kernel_deps
    assert deps is not None
    return deps


def test_the_dependency_folder_and_its_transitive_one_with_their_urls(tmp_path: Path) -> None:
    directory = kernel(tmp_path)
    b = KernelFiles(
        "org/b", B, {"torch-universal": VariantFiles({"metadata.json": SHA}, (("org/c", 2),))}
    )
    c = KernelFiles(
        "org/c",
        C,
        {
            "torch-cpu": VariantFiles({"metadata.json": SHA, "c/__init__.py": SHA}),
            "torch-cuda": VariantFiles({"metadata.json": SHA}),
        },
    )
    lock(directory, [LockedKernel("org/b", 1, B), LockedKernel("org/c", 2, C)], [b, c])
    deps = deps_of(directory)
    assert deps.error is None and deps.lock_sha256
    assert [(d.repo_id, d.variant) for d in deps.kernels] == [
        ("org/b", "torch-universal"),
        ("org/c", "torch-cpu"),
    ]
    urls = [f.url for f in deps.kernels[1].files]
    assert urls == [
        f"{ENDPOINT}/kernels/org/c/resolve/{C}/build/torch-cpu/c/__init__.py",
        f"{ENDPOINT}/kernels/org/c/resolve/{C}/build/torch-cpu/metadata.json",
    ]


def test_a_missing_lock_is_the_variants_error_and_names_the_command(tmp_path: Path) -> None:
    deps = deps_of(kernel(tmp_path))
    assert deps.kernels == [] and deps.lock_sha256 is None
    assert deps.error is not None
    assert "kernels.lock is missing; run `kernelnix lock`" in deps.error


def test_a_lock_of_another_version_is_stale(tmp_path: Path) -> None:
    directory = kernel(tmp_path)
    b = KernelFiles("org/b", B, {"torch-cpu": VariantFiles({"metadata.json": SHA})})
    lock(directory, [LockedKernel("org/b", 2, B)], [b])
    error = deps_of(directory).error
    assert error is not None
    assert "kernels.lock no longer matches build.toml: it does not lock org/b version 1" in error
    assert "kernelnix lock" in error


def test_a_dependency_without_a_folder_for_the_variant_names_what_it_has(tmp_path: Path) -> None:
    directory = kernel(tmp_path)
    b = KernelFiles("org/b", B, {"torch-cuda": VariantFiles({"metadata.json": SHA})})
    lock(directory, [LockedKernel("org/b", 1, B)], [b])
    error = deps_of(directory).error
    assert error == (
        f"kernel dependency org/b (at {B}) has no variant that loads beside torch-cpu "
        "(looked for torch-cpu, torch-universal; it has torch-cuda): leave this variant out "
        "(torchVersions in flake.nix, or the backend in build.toml), or depend on a version "
        "of it that builds one"
    )


@pytest.mark.parametrize(
    ("path", "message"),
    [("../etc/passwd", "is not a plain relative path"), (".hidden", "is not a plain")],
)
def test_a_files_lock_with_an_unsafe_path_is_refused(
    tmp_path: Path, path: str, message: str
) -> None:
    b = KernelFiles("org/b", B, {"torch-cpu": VariantFiles({path: SHA})})
    write_files_lock(tmp_path / FILES_LOCK_NAME, FilesLock(ENDPOINT, (b,)))
    with pytest.raises(UserError) as info:
        read_files_lock(tmp_path / FILES_LOCK_NAME)
    assert message in info.value.diagnostics[0].message
