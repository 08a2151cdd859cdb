"""Setuptools hook: a built (non-editable) kernelnix carries its Nix library.

The wheel gets `kernelnix/data/flake/`, a copy of the kernelnix flake as the
source tree lays it out (flake.nix, flake.lock, nix/, pyproject.toml, README.md
and the kernelnix package itself), so that a pip-installed kernelnix can hand
Nix a flake of exactly its own version (kernelnix.project.library). Editable
installs use the source tree instead.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).parent
LIBRARY = Path("kernelnix") / "data" / "flake"
TOP_LEVEL_FILES = ("flake.nix", "flake.lock", "pyproject.toml", "README.md")
SKIPPED = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")


class BuildWithNixLibrary(build_py):
    """`build_py`, then the flake copy into the build directory."""

    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            return
        target = Path(self.build_lib) / LIBRARY
        shutil.rmtree(target, ignore_errors=True)
        target.mkdir(parents=True)
        for name in TOP_LEVEL_FILES:
            shutil.copy2(ROOT / name, target / name)
        shutil.copytree(ROOT / "nix", target / "nix", ignore=SKIPPED)
        shutil.copytree(ROOT / "kernelnix", target / "kernelnix", ignore=SKIPPED)


setup(cmdclass={"build_py": BuildWithNixLibrary})
