"""kernelnix.project.nix's one decision about the sandbox (`sandbox_options`), evaluated
by real Nix on flakes whose derivation runs /bin/sh (the host toolchain's builder)
or a shell in the store (the hermetic toolchain's): only the second builds sandboxed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from kernelnix.host.system import current_system
from kernelnix.project.nix import FlakeProject, sandbox_options

pytestmark = pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix")

FLAKE = """{
  outputs = { self }: {
    packages.SYSTEM.bundle = derivation {
      name = "bundle";
      system = "SYSTEM";
      builder = BUILDER;
    };
  };
}
"""


@pytest.mark.parametrize(
    ("builder", "options"),
    [
        ('"/bin/sh"', ()),
        ('builtins.toFile "shell" "#!"', ("--option", "sandbox", "true")),
    ],
)
def test_the_sandbox_is_on_when_the_builder_is_in_the_store(
    tmp_path: Path, builder: str, options: tuple[str, ...]
) -> None:
    text = FLAKE.replace("SYSTEM", current_system()).replace("BUILDER", builder)
    (tmp_path / "flake.nix").write_text(text)
    assert sandbox_options(FlakeProject(tmp_path), "bundle") == options
