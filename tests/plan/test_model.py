"""The plan's models: golden plans of the examples, the file read back, rebasing."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import jsonschema
import pytest
from click.testing import CliRunner
from paths import EXAMPLES, GOLDEN
from pydantic import ValidationError

from kernelnix.cli import main
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import SCHEMA_VERSION, KernelGitState, Plan, plan_schema, read_plan

EXAMPLE_NAMES = sorted(p.parent.name for p in EXAMPLES.glob("*/build.toml"))
SYSTEM = "x86_64-linux"
CPU = "torch213-cxx11-cpu-x86_64-linux"


def example_plan(example: str) -> Plan:
    """The plan of an example: fixed unique id, so no git state (deterministic)."""
    return build_plan(load_config(EXAMPLES / example), PlanOptions(unique_id="golden"))


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_example_plans_golden(example: str, golden: Callable[[str, str], None]) -> None:
    golden(f"plan/{example}.json", example_plan(example).to_json())


def test_every_golden_plan_is_of_an_example() -> None:
    assert sorted(p.stem for p in (GOLDEN / "plan").glob("*.json")) == EXAMPLE_NAMES


@pytest.mark.parametrize("example", EXAMPLE_NAMES)
def test_a_written_plan_reads_back_the_same(example: str, tmp_path: Path) -> None:
    plan = example_plan(example)
    path = tmp_path / "plan.json"
    path.write_text(plan.to_json())
    assert read_plan(path) == plan
    assert read_plan(path).to_json() == path.read_text()


def _written(tmp_path: Path, edit: Callable[[dict], object]) -> Path:
    data = json.loads(example_plan("relu").to_json())
    edit(data)
    path = tmp_path / "plan.json"
    path.write_text(json.dumps(data))
    return path


def _cpu(data: dict) -> dict:
    variant: dict = data["variants"][SYSTEM][CPU]
    return variant


@pytest.mark.parametrize(
    ("edit", "key", "message"),
    [
        (lambda d: _cpu(d).pop("torch"), f"variants.{SYSTEM}.{CPU}.torch", "key is missing"),
        (lambda d: _cpu(d).update(bundle="yes"), f"variants.{SYSTEM}.{CPU}.bundle", "boolean"),
        (lambda d: d.update(extra=1), "extra", "unknown key"),
        (lambda d: d["kernels"]["relu"].update(backend="tpu"), "kernels.relu.backend", "'cpu'"),
        (lambda d: d.update(version="1"), "version", "integer"),
    ],
)
def test_a_misshapen_plan_is_refused_with_its_key(
    tmp_path: Path, edit: Callable[[dict], object], key: str, message: str
) -> None:
    path = _written(tmp_path, edit)
    with pytest.raises(UserError) as caught:
        read_plan(path)
    (diagnostic,) = caught.value.diagnostics
    assert (diagnostic.file, diagnostic.key) == (str(path), key)
    assert message in diagnostic.message
    assert diagnostic.fix and "kernelnix generate" in diagnostic.fix


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"nope", "not a plan file"),
        (b"\xff\xfe", "not a plan file"),
        (b"[1]", f"plan schema None is not {SCHEMA_VERSION}"),
        (b'{"schema-version": 1}', f"plan schema 1 is not {SCHEMA_VERSION}"),
    ],
)
def test_what_is_no_plan_of_this_schema_is_refused(
    tmp_path: Path, text: bytes, message: str
) -> None:
    path = tmp_path / "plan.json"
    path.write_bytes(text)
    with pytest.raises(UserError) as caught:
        read_plan(path)
    rendered = caught.value.render()
    assert message in rendered and str(path) in rendered and "kernelnix plan" in rendered


def test_build_variant_reports_a_misshapen_plan_without_a_traceback(tmp_path: Path) -> None:
    path = _written(tmp_path, lambda d: _cpu(d).pop("kind"))
    args = ["build-variant", "--plan", str(path), "--variant", CPU, "--source"]
    args += [str(EXAMPLES / "relu"), "--out", str(tmp_path / "out")]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert f"variants.{SYSTEM}.{CPU}.kind: required key is missing" in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


def test_a_new_unique_id_renames_every_op_namespace() -> None:
    plan = example_plan("relu")
    rebased = plan.with_unique_id("dev")
    assert rebased.unique_id == "dev"
    for system, variants in rebased.variants.items():
        for name, variant in variants.items():
            assert variant.ops_id == f"_relu_{variant.backend}_dev" == variant.metadata.id
            assert plan.variants[system][name].ops_id.endswith("_golden")  # a copy


def test_the_kernel_commit_reaches_every_provenance() -> None:
    commit = KernelGitState(commit="0123456", dirty=True)
    plan = example_plan("relu-noarch").with_kernel_git(commit)
    assert plan.kernel_git == commit
    for variants in plan.variants.values():
        for variant in variants.values():
            provenance = variant.metadata.to_data()["provenance"]
            assert provenance["kernel"] == {"commit": "0123456", "dirty": True}
    cleared = plan.with_kernel_git(None)
    assert all(
        "kernel" not in v.metadata.to_data()["provenance"]
        for v in cleared.variants[SYSTEM].values()
    )


def test_plans_are_frozen() -> None:
    plan = example_plan("relu")
    with pytest.raises(ValidationError):
        plan.unique_id = "other"  # type: ignore[misc]


def test_a_plan_validates_against_its_json_schema() -> None:
    validator = jsonschema.Draft202012Validator(plan_schema())
    for example in EXAMPLE_NAMES:
        assert list(validator.iter_errors(json.loads(example_plan(example).to_json()))) == []
    broken = json.loads(example_plan("relu").to_json()) | {"config": {}}
    assert [e.message for e in validator.iter_errors(broken)] == [
        "Additional properties are not allowed ('config' was unexpected)"
    ]
