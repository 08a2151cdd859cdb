"""docs/plan.md's key tables are the models' (kernelnix.plan.docs)."""

from __future__ import annotations

import pytest
from paths import ROOT

from kernelnix.plan.docs import SECTIONS, plan_tables

DOC = ROOT / "docs" / "plan.md"
BEGIN = "checks it, `pytest tests/plan/test_docs.py --update-golden` rewrites it -->\n"
END = "<!-- end of the generated tables -->\n"


def test_the_documented_keys_are_the_models(request: pytest.FixtureRequest) -> None:
    text = DOC.read_text()
    head, rest = text.split(BEGIN)
    documented, tail = rest.split(END)
    if request.config.getoption("--update-golden"):
        DOC.write_text(head + BEGIN + plan_tables() + END + tail)
        return
    assert documented == plan_tables(), "docs/plan.md is stale: pytest --update-golden"


def test_every_key_has_a_meaning() -> None:
    for model, _, _ in SECTIONS:
        assert all(info.description for info in model.model_fields.values()), model
