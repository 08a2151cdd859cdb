"""Property tests: whatever build.toml holds, kernelnix never crashes.

Every run of `check-config`, `list-variants` and `plan` ends with exit 0 or a
clean error (exit 2, no traceback); plans of accepted files are deterministic.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import tomlkit
from click.testing import CliRunner
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from paths import BUILD_OUTPUTS, EXAMPLES
from strategies import HOSTILE, WORDS, text

from kernelnix.cli import main

KEYS = {
    "general": [
        "name",
        "version",
        "edition",
        "license",
        "backends",
        "upstream",
        "source",
        "python-depends",
        "kernel-depends",
        "hub",
        "cuda",
        "tpu",
        "bogus",
    ],
    "torch": ["src", "include", "minver", "maxver", "pyext", "stable-abi", "cxx-flags"],
    "kernel": [
        "backend",
        "src",
        "depends",
        "include",
        "cxx-flags",
        "cuda-capabilities",
        "cuda-flags",
        "cuda-minver",
        "rocm-archs",
        "hip-flags",
        "sycl-flags",
    ],
}
scalar = st.one_of(text, st.integers(-3, 2**40), st.floats(allow_nan=False), st.booleans())
value = st.recursive(
    scalar,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4), st.dictionaries(st.sampled_from(WORDS), inner, max_size=3)
    ),
    max_leaves=8,
)


def table(section: str) -> st.SearchStrategy[dict[str, Any]]:
    return st.dictionaries(st.sampled_from(KEYS[section]), value, max_size=len(KEYS[section]))


documents = st.fixed_dictionaries(
    {"general": table("general")},
    optional={
        "torch": table("torch"),
        "torch-noarch": st.dictionaries(st.sampled_from(["pyext", "cuda_capabilities"]), value),
        "tvm-ffi": table("torch"),
        "kernel": st.dictionaries(
            st.sampled_from(["relu", "a.b", "x y"]), table("kernel"), max_size=3
        ),
    },
)

PROPERTY_SETTINGS = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def run(args: list[str]) -> Any:
    result = CliRunner().invoke(main, args, catch_exceptions=False)
    assert result.exit_code in (0, 2), result.output
    assert "Traceback" not in result.output
    if result.exit_code == 2:
        assert "error:" in result.output
    return result


def check_all_commands(directory: Path) -> None:
    checked = run(["check-config", str(directory)])
    listed = run(["list-variants", str(directory), "--all-systems"])
    first = run(["plan", str(directory), "--unique-id", "prop", "-o", str(directory / "a.json")])
    if 2 in (listed.exit_code, first.exit_code):  # check-config is the whole gate
        assert checked.exit_code == 2, (listed.output, first.output)
    if first.exit_code == 0:
        run(["plan", str(directory), "--unique-id", "prop", "-o", str(directory / "b.json")])
        assert (directory / "a.json").read_bytes() == (directory / "b.json").read_bytes()
        json.loads((directory / "a.json").read_text())


@PROPERTY_SETTINGS
@given(document=documents)
def test_generated_documents_never_crash(tmp_path_factory: Any, document: dict[str, Any]) -> None:
    directory = tmp_path_factory.mktemp("doc")
    (directory / "build.toml").write_text(tomlkit.dumps(document))
    check_all_commands(directory)


@PROPERTY_SETTINGS
@given(
    example=st.sampled_from(sorted(p.parent.name for p in EXAMPLES.glob("*/build.toml"))),
    cut=st.integers(0, 4000),
    insert=st.sampled_from(["", *HOSTILE, "[", "=", "\x00", "\ufeff"]),
    drop=st.integers(0, 5),
)
def test_mutated_examples_never_crash(
    tmp_path_factory: Any, example: str, cut: int, insert: str, drop: int
) -> None:
    directory = tmp_path_factory.mktemp("mut")
    shutil.copytree(EXAMPLES / example, directory, dirs_exist_ok=True, ignore=BUILD_OUTPUTS)
    original = (directory / "build.toml").read_text()
    cut = min(cut, len(original))
    (directory / "build.toml").write_text(original[:cut] + insert + original[cut + drop :])
    check_all_commands(directory)
