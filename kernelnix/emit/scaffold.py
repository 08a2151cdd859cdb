"""`kernelnix init`: a new edition-5 kernel project, like the reference's scaffold.

The sample kernel computes `out = input + 1` for float32 tensors, with one
implementation per chosen backend (CPU, CUDA (also built for ROCm), Metal,
XPU) behind one Torch op `<n>(Tensor! out, Tensor input) -> ()`. Files are
rendered from kernelnix/templates/init/; CARD.md is the default card template itself
(kernelnix/templates/card/CARD.md.j2), for `kernelnix fill-card` to render later.

kernelnix.project.generate writes the files: every target is checked before the
first file is written, nothing is overwritten without `overwrite`, then the flake
files are generated and the directory is made a git repository with everything
staged (Nix flakes only see tracked files).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelnix.config.types import BACKENDS, check_kernel_name
from kernelnix.core.diagnostics import UserError
from kernelnix.emit.card import DEFAULT_TEMPLATE
from kernelnix.emit.render import render

ALL = "all"
DEFAULT_LICENSE = "Apache-2.0"
ROCM_ARCHS = (
    "gfx906",
    "gfx908",
    "gfx90a",
    "gfx940",
    "gfx941",
    "gfx942",
    "gfx1030",
    "gfx1100",
    "gfx1101",
)
# Torch device of each backend with a sample kernel, in the tests' order of preference.
DEVICES = {"cuda": "cuda", "rocm": "cuda", "xpu": "xpu", "metal": "mps", "cpu": "cpu"}


@dataclass(frozen=True)
class Template:
    """One scaffold file: its path (with `{n}` for the module name) and its template."""

    target: str
    template: str
    backends: tuple[str, ...] = ()  # written when one of these is chosen; () = always


FILES = (
    Template("build.toml", "build.toml.j2"),
    Template(".gitignore", "gitignore.j2"),
    Template(".gitattributes", "gitattributes.j2"),
    Template("torch-ext/torch_binding.cpp", "torch_binding.cpp.j2"),
    Template("torch-ext/torch_binding.h", "torch_binding.h.j2"),
    Template("torch-ext/{n}/__init__.py", "package_init.py.j2"),
    Template("{n}_cpu/{n}_cpu.cpp", "kernel_cpu.cpp.j2", ("cpu",)),
    Template("{n}_cuda/{n}.cu", "kernel_cuda.cu.j2", ("cuda", "rocm")),
    Template("{n}_metal/{n}.metal", "kernel_metal.metal.j2", ("metal",)),
    Template("{n}_metal/{n}.mm", "kernel_metal.mm.j2", ("metal",)),
    Template("{n}_xpu/{n}.cpp", "kernel_xpu.cpp.j2", ("xpu",)),
    Template("tests/__init__.py", "tests_init.py.j2"),
    Template("tests/conftest.py", "tests_conftest.py.j2"),
    Template("tests/test_{n}.py", "test_kernel.py.j2"),
    Template("example.py", "example.py.j2"),
    Template("benchmarks/benchmark.py", "benchmark.py.j2"),
)
CARD = "CARD.md"


@dataclass(frozen=True)
class KernelNames:
    """The names of a kernel published as `owner/repo`."""

    owner: str
    repo: str

    @property
    def name(self) -> str:
        """The kernel name of build.toml: the repository name with `_` as `-`."""
        return self.repo.replace("_", "-")

    @property
    def repo_id(self) -> str:
        return f"{self.owner}/{self.name}"

    @property
    def module(self) -> str:
        """The Python module, op and function name."""
        return self.repo.lower().replace("-", "_")

    @property
    def class_name(self) -> str:
        return "".join(part.capitalize() for part in self.module.split("_"))


def parse_repo_id(value: str) -> KernelNames | None:
    """`owner/repo` as KernelNames; None when `value` has another shape."""
    owner, slash, repo = value.partition("/")
    if not slash or not owner or not repo or "/" in repo:
        return None
    return KernelNames(owner, repo)


def resolve_target(
    path: str | None, name: str | None, cwd: Path, hub_user: Callable[[], str]
) -> tuple[KernelNames, Path]:
    """The kernel's names and directory, from `--name` and PATH as the reference resolves them.

    `--name owner/repo` names the kernel and gives the directory `./<name>`, which
    PATH overrides. PATH alone is the name when it reads `owner/repo`; else it is
    the directory, whose name is the repository's. Neither: the current
    directory. Without `owner/`, the owner is the user logged in to the Hub (`hub_user`,
    asked only then).
    """
    if name is not None:
        names = parse_repo_id(name)
        if names is None:
            raise UserError.single(
                f"invalid --name {name!r}: expected <owner>/<repo>",
                key="--name",
                fix="pass the Hub repository of the kernel, e.g. --name my-org/my-kernel",
            )
        directory = cwd / (path or names.name)
    elif path is not None and (names := parse_repo_id(path)) is not None:
        directory = cwd / names.name
    else:
        directory = cwd / (path or ".")
        names = KernelNames(hub_user(), directory.resolve().name)
    try:
        check_kernel_name(names.name)
    except ValueError as exc:
        raise UserError.single(
            str(exc), key="--name", fix="name the repository with lowercase letters, digits and '-'"
        ) from None
    return names, directory


def resolve_backends(selected: Sequence[str]) -> list[str]:
    """The backends of build.toml: `all` is every backend, else the list without repeats."""
    lowered = [backend.lower() for backend in selected]
    if ALL in lowered:
        return list(BACKENDS)
    unknown = [b for b in lowered if b not in BACKENDS]
    if unknown:
        raise UserError.single(
            f"unknown backend(s): {', '.join(unknown)}",
            key="--backends",
            fix=f"use `all` or some of: {', '.join(BACKENDS)}",
        )
    return list(dict.fromkeys(lowered))


def scaffold_files(names: KernelNames, backends: list[str], license: str) -> dict[str, str]:
    """Relative path -> text of every file `init` writes itself (flake files aside)."""
    context: dict[str, Any] = {
        "name": names.name,
        "module": names.module,
        "class_name": names.class_name,
        "repo_id": names.repo_id,
        "license": license,
        "backends": backends,
        "rocm_archs": ROCM_ARCHS,
        "devices": {b: d for b, d in DEVICES.items() if b in backends},
    }
    files = {
        item.target.format(n=names.module): render(f"init/{item.template}", context)
        for item in FILES
        if not item.backends or set(item.backends) & set(backends)
    }
    files[CARD] = DEFAULT_TEMPLATE.read_text(encoding="utf-8")
    return files
