"""`kernelnix plan --matrix FILE`: build sets replacing the matrix's, as a
kernel-builder flake's `torchVersions` gives them to the plan the flake
computes (nix/lib/torch-versions.nix writes the file)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from click.testing import CliRunner
from paths import EXAMPLES

from kernelnix.cli import main


def plan_with(tmp_path: Path, build_sets: Any) -> tuple[int, str, dict[str, Any] | None]:
    matrix = tmp_path / "build-sets.json"
    matrix.write_text(json.dumps({"build-sets": build_sets}))
    out = tmp_path / "plan.json"
    args = ["plan", str(EXAMPLES / "relu"), "-o", str(out), "--unique-id", "t"]
    result = CliRunner().invoke(main, [*args, "--matrix", str(matrix)])
    plan = json.loads(out.read_text()) if out.exists() else None
    return result.exit_code, result.output, plan


def test_the_plan_has_exactly_the_given_build_sets(tmp_path: Path) -> None:
    code, output, plan = plan_with(
        tmp_path,
        [
            {"torch": "2.13", "backend": "cpu", "systems": ["x86_64-linux"], "bundle": True},
            {"torch": "2.13", "backend": "cuda", "version": "12.6", "systems": ["x86_64-linux"]},
        ],
    )
    assert code == 0, output
    assert plan is not None
    systems = plan["systems"]
    assert systems["x86_64-linux"]["variants"] == [
        "torch213-cxx11-cpu-x86_64-linux",
        "torch213-cxx11-cu126-x86_64-linux",
    ]
    # `bundle` defaults to false, as kernel-builder's `bundleBuild` does.
    assert systems["x86_64-linux"]["bundle"] == ["torch213-cxx11-cpu-x86_64-linux"]
    assert systems["aarch64-linux"]["variants"] == []


def test_bad_build_sets_are_named_with_their_key(tmp_path: Path) -> None:
    code, output, plan = plan_with(
        tmp_path,
        [
            {"torch": "2.x", "backend": "cpu", "systems": ["x86_64-linux"]},
            {"torch": "2.13", "backend": "cuda", "systems": ["x86_64-linux"]},
            {"torch": "2.13", "backend": "tpu", "systems": ["x86_64-linux"], "extra": 1},
            {"torch": "2.13", "backend": "cpu", "systems": ["riscv64-linux"]},
        ],
    )
    assert code == 2
    assert plan is None
    assert "build-sets.json: build-sets[0].torch: version must consist of" in output
    assert "build-sets[1].version: backend 'cuda' needs a version" in output
    assert "build-sets[2].extra: unknown key" in output
    assert "build-sets[3].systems: unknown system 'riscv64-linux'" in output
    assert "Traceback" not in output


def test_a_file_without_build_sets_is_refused(tmp_path: Path) -> None:
    code, output, _ = plan_with(tmp_path, {"torch": "2.13"})
    assert code == 2
    assert "build-sets.json: build-sets: expected an object with a list" in output
