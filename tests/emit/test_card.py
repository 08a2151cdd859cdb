"""`kernelnix fill-card`: the Hub card of a kernel, from its template and its sources."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from handmade import copy_example
from paths import ROOT

from kernelnix.cli import main
from kernelnix.config import load_config
from kernelnix.emit.card import card_context, exported_names


def fill_card(*args: str) -> Result:
    return CliRunner().invoke(main, ["fill-card", *args])


@pytest.mark.parametrize("example", ["relu", "multi-kernel", "relu-noarch"])
def test_examples(example: str, golden: Callable[[str, str], None]) -> None:
    result = fill_card(str(ROOT / "examples" / example))
    assert result.exit_code == 0, result.output
    golden(f"card/{example}.md", result.output)


def test_multi_kernel_context() -> None:
    context = card_context(load_config(ROOT / "examples" / "multi-kernel"))
    assert context["functions"] == ["silu", "scale", "silu_variant"]
    assert context["layers"] == ["SiLU"]
    assert context["license"] == "apache-2.0"
    assert context["version"] == 1
    assert context["has_benchmark"] is False


@pytest.fixture
def kernel(tmp_path: Path) -> Path:
    return copy_example("relu", tmp_path)


def test_the_projects_template_and_every_variable(kernel: Path) -> None:
    toml = kernel / "build.toml"
    toml.write_text(
        toml.read_text().replace(
            'license = "Apache-2.0"',
            'license = "MIT"\nupstream = "https://github.com/a/b"\nsource = "git@example.com:c/d"',
        )
    )
    (kernel / "benchmarks").mkdir()
    (kernel / "benchmarks" / "benchmark.py").write_text("")
    package = kernel / "torch-ext" / "relu"
    (package / "__init__.py").write_text('__all__ = ("relu", "layers", 3, "gelu")\n')
    (package / "layers").mkdir()
    (package / "layers" / "__init__.py").write_text("class ReLU:\n    pass\n\n\nclass GELU: ...\n")
    (kernel / "CARD.md").write_text(
        "repo_id={{ repo_id }}\nversion={{ version }}\nfunctions={{ functions }}\n"
        "layers={{ layers }}\nhas_benchmark={{ has_benchmark }}\nupstream={{ upstream }}\n"
        "source={{ source }}\nlicense={{ license }}\nundefined=[{{ undefined }}]\n"
    )
    output = kernel / "out" / "README.md"
    result = fill_card(str(kernel), str(output))
    assert result.exit_code == 0, result.output
    assert result.stdout == ""
    assert output.read_text() == (
        "repo_id=kernelnix-examples/relu\nversion=1\nfunctions=['relu', 'gelu']\n"
        "layers=['ReLU', 'GELU']\nhas_benchmark=True\nupstream=https://github.com/a/b\n"
        "source=git@example.com:c/d\nlicense=mit\nundefined=[]\n"
    )


def test_layers_only_when_exported(kernel: Path) -> None:
    package = kernel / "torch-ext" / "relu"
    (package / "layers.py").write_text("class ReLU:\n    pass\n")
    assert card_context(load_config(kernel))["layers"] is None
    (package / "__init__.py").write_text('__all__ = ["layers"]\n')
    context = card_context(load_config(kernel))
    assert (context["functions"], context["layers"]) == (None, ["ReLU"])


def test_without_all_the_card_says_so(kernel: Path) -> None:
    (kernel / "torch-ext" / "relu" / "__init__.py").write_text("def relu(x):\n    return x\n")
    result = fill_card(str(kernel))
    assert "Usage example not available." in result.output
    assert "Function list not available." in result.output


def test_all_is_read_without_importing(tmp_path: Path) -> None:
    init = tmp_path / "__init__.py"
    init.write_text('raise SystemExit("imported")\n__all__ = ["a", "b"]\n')
    assert exported_names(init) == ["a", "b"]


def test_missing_repo_id(kernel: Path) -> None:
    toml = kernel / "build.toml"
    toml.write_text(
        toml.read_text().replace('[general.hub]\nrepo-id = "kernelnix-examples/relu"', "")
    )
    result = fill_card(str(kernel))
    assert result.exit_code == 2
    assert (
        "build.toml: general.hub.repo-id: Cannot fill card template because `repo-id`"
        in result.output
    )
    assert "Traceback" not in result.output


def test_python_syntax_error(kernel: Path) -> None:
    (kernel / "torch-ext" / "relu" / "__init__.py").write_text("__all__ = [\n")
    result = fill_card(str(kernel))
    assert result.exit_code == 2
    assert "torch-ext/relu/__init__.py:1: cannot parse Python" in result.output


def test_template_syntax_error_writes_nothing(kernel: Path) -> None:
    (kernel / "CARD.md").write_text("fine\n{% if functions %}\nno endif\n")
    output = kernel / "card.md"
    result = fill_card(str(kernel), str(output))
    assert result.exit_code == 2
    assert "CARD.md:3: invalid template" in result.output
    assert not output.exists()


def test_the_template_is_sandboxed(kernel: Path) -> None:
    (kernel / "CARD.md").write_text("{{ repo_id.__class__.__mro__[1].__subclasses__() }}\n")
    result = fill_card(str(kernel))
    assert result.exit_code == 2
    assert "CARD.md: cannot render the card" in result.output
