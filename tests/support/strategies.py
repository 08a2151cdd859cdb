"""Hypothesis strategies over build.toml, shared by the property tests.

`text` draws anything a string field may hold, hostile values included;
`valid_projects` draws kernel projects whose build.toml loads and plans, with hostile
values wherever build.toml allows them (kernel names, flags, file names, Hub
repo and branch).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import tomlkit
from hypothesis import strategies as st

HOSTILE = ['"', "'", "${x}", "$(rm -rf /)", "\\", "\n", ";", "`id`", ")", "]]", "#", "..", "/"]
WORDS = [
    "cpu",
    "cuda",
    "rocm",
    "xpu",
    "metal",
    "tpu",
    "torch",
    "2.12",
    "12.6",
    "9.0a",
    "8.0",
    "gfx942",
    "relu",
    "k.cpp",
    "Apache-2.0",
    "https://github.com/o/r",
    "einops",
    "5",
]
# Hostile values that are also one string each to Nix, the shell and Python.
INJECTIONS = [
    '";abort "pwned";"',
    '${builtins.abort "pwned"}',
    "''${x}''",
    "$(touch pwned)",
    "`touch pwned`",
    "a'b\"c\\d",
    "x\ny\r\tz",
    '-DX="${y}" ; exit 1',
]

text = st.one_of(st.sampled_from(WORDS + HOSTILE), st.text(max_size=12))
# No argv entry, file name or Nix string can hold a NUL.
argument = st.one_of(st.sampled_from(INJECTIONS), text).filter(lambda s: "\0" not in s)

BACKENDS = ["cpu", "cuda", "rocm", "xpu", "metal"]
SUFFIXES = {"cpu": ".cpp", "cuda": ".cu", "rocm": ".cu", "xpu": ".cpp", "metal": ".mm"}
FLAG_KEYS = {"cuda": "cuda-flags", "rocm": "hip-flags", "xpu": "sycl-flags"}


def _legal_component(name: str) -> bool:
    # build.toml paths may not climb out with `..`, also spelled with backslashes.
    parts = name.replace("\\", "/").split("/")
    return bool(name.strip()) and "/" not in name and not {".", ".."} & set(parts)


file_part = argument.filter(_legal_component)
flags = st.lists(argument, max_size=3)


@dataclass(frozen=True)
class Project:
    """A kernel project: build.toml as a dict and the files it needs."""

    document: dict[str, Any]
    files: tuple[str, ...]

    def write(self, directory: Path) -> None:
        for relative in self.files:
            path = directory / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("// source\n" if path.suffix != ".py" else "X = 1\n")
        (directory / "build.toml").write_text(tomlkit.dumps(self.document))


@st.composite
def valid_projects(draw: st.DrawFn) -> Project:
    """A project whose build.toml loads and plans: CPU plus other backends, 1-3 kernels,
    hostile values included (the CMake project and check-config refuse some of them)."""
    name = draw(st.from_regex(r"[a-z][a-z0-9-]{0,10}[a-z0-9]", fullmatch=True))
    package = f"torch-ext/{name.replace('-', '_')}"
    backends = ["cpu", *draw(st.lists(st.sampled_from(BACKENDS[1:]), unique=True))]
    general: dict[str, Any] = {
        "name": name,
        "version": 1,
        "edition": 5,
        "license": "Apache-2.0",
        "backends": backends,
    }
    hub = draw(st.dictionaries(st.sampled_from(["repo-id", "branch"]), argument))
    if hub:
        general["hub"] = hub
    binding = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]
    python = [f"{package}/{stem}.py" for stem in draw(st.lists(file_part, max_size=2))]
    files = [*binding, f"{package}/__init__.py", *python]
    kernels: dict[str, Any] = {}
    for kernel in draw(st.lists(argument, min_size=1, max_size=3, unique=True)):
        backend = draw(st.sampled_from(backends))
        suffix = SUFFIXES[backend]
        src = [
            f"{d}/{f}{suffix}"
            for d, f in draw(st.lists(st.tuples(file_part, file_part), min_size=1, max_size=2))
        ]
        section = {"backend": backend, "depends": ["torch"], "src": src, "cxx-flags": draw(flags)}
        if backend in FLAG_KEYS:
            section[FLAG_KEYS[backend]] = draw(flags)
        kernels[kernel] = section
        files += src
    document = {
        "general": general,
        "torch": {"src": binding, "cxx-flags": draw(flags)},
        "kernel": kernels,
    }
    return Project(document, tuple(dict.fromkeys(files)))
