"""Variant directories made by hand (no compiler): the plan's metadata.json plus a few files."""

from __future__ import annotations

import json
import shutil
import subprocess
from functools import cache
from pathlib import Path
from typing import Any

from paths import EXAMPLES

from kernelnix.config import load_config
from kernelnix.host.system import current_system
from kernelnix.plan.build import PlanOptions, build_plan, plan_directory
from kernelnix.plan.model import Plan

SYSTEM = "x86_64-linux"
UNIQUE_ID = "abc1234"

OPS = """\
import torch

ops = torch.ops.{id}


def add_op_namespace_prefix(op_name: str) -> str:
    return "{id}::" + op_name
"""


@cache
def _plan(example: str) -> Plan:
    loaded = load_config(EXAMPLES / example)
    return build_plan(loaded, PlanOptions(systems=(SYSTEM,), unique_id=UNIQUE_ID))


def plan_metadata(example: str, variant: str) -> dict[str, Any]:
    """The metadata.json the build writes for `variant` of an example (a fresh copy)."""
    return _plan(example).variants[SYSTEM][variant].metadata.to_data()


def copy_example(example: str, destination: Path) -> Path:
    """The example's sources (no build outputs) under `destination/<example>`."""
    target = destination / example
    ignore = shutil.ignore_patterns("build", "result", "__pycache__")
    shutil.copytree(EXAMPLES / example, target, ignore=ignore)
    return target


def make_variant(
    build_dir: Path,
    example: str,
    variant: str,
    files: dict[str, bytes] | None = None,
    metadata: dict[str, Any] | None = None,
) -> Path:
    """`build_dir/<variant>/`: metadata.json, the package's __init__.py, an _ops.py, `files`."""
    directory = build_dir / variant
    directory.mkdir(parents=True)
    metadata = metadata or plan_metadata(example, variant)
    (directory / "metadata.json").write_text(json.dumps(metadata, indent=2) + "\n")
    package = EXAMPLES / example / _plan(example).package_dir
    shutil.copy(package / "__init__.py", directory / "__init__.py")
    (directory / "_ops.py").write_text(OPS.format(id=metadata["id"]))
    for relative, content in (files or {}).items():
        (directory / relative).parent.mkdir(parents=True, exist_ok=True)
        (directory / relative).write_bytes(content)
    return directory


def committed_copy(example: str, root: Path) -> Path:
    """A copy of an example in its own git repository (a stable unique id)."""
    copy = root / example
    shutil.copytree(EXAMPLES / example, copy, ignore=shutil.ignore_patterns("build", "__pycache__"))
    git = ["git", "-C", str(copy), "-c", "user.name=kernelnix", "-c", "user.email=k@example.com"]
    subprocess.run([*git, "init", "-q"], check=True)
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "example"], check=True)
    return copy


def plan_here(directory: Path) -> Plan:
    """The plan of `directory` for this machine's system."""
    return plan_directory(directory, PlanOptions(systems=(current_system(),)))[1]


def relu_with_shared_sources(root: Path, tables: str) -> Path:
    """A copy of examples/relu in `root` with kernel `tables` appended to its
    build.toml, and relu_cpu/second.h for them to list: kernels that list
    relu_cpu's source too (kernels-community's flash-mla: two kernels list the
    same API sources)."""
    kernel = root / "relu"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("build"))
    (kernel / "relu_cpu" / "second.h").write_text("#pragma once\n")
    with (kernel / "build.toml").open("a") as config:
        config.write(tables)
    return kernel


def variant_with_library(build_dir: Path, example: str, variant: str, library: Path) -> Path:
    """`make_variant` with a real shared library, named after the variant's kernel id
    (`<id>.abi3.so`, as the build installs it)."""
    name = f"{plan_metadata(example, variant)['id']}.abi3.so"
    return make_variant(build_dir, example, variant, files={name: library.read_bytes()})


DEPENDENT_TOML = """\
[general]
name = "{name}"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu"]
kernel-depends = [{{ repo-id = "{repo}", version = 1 }}]

[torch-noarch]
"""


def kernel_depending_on(directory: Path, repo: str, name: str = "uses-b") -> Path:
    """A CPU noarch kernel at `directory` whose build.toml depends on version 1 of `repo`."""
    package = directory / "torch-ext" / name.replace("-", "_")
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (directory / "build.toml").write_text(DEPENDENT_TOML.format(name=name, repo=repo))
    return directory
