"""The JSON Schemas of build.toml and metadata.json (`kernelnix schema`), checked
with the `jsonschema` library against what the loader accepts and rejects: every
example and good config, every bad config of the corpus, each value type's
pattern against its validator, and every metadata.json a plan of the examples
holds. The shipped copies (kernelnix/data/schema/) change only with
`pytest --update-golden`."""

from __future__ import annotations

import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner
from paths import EXAMPLES, ROOT, TESTS

from kernelnix.cli import main
from kernelnix.commands.schema import SCHEMAS, schema_text
from kernelnix.config import load_config
from kernelnix.config.json_schema import build_toml_schema
from kernelnix.config.load import read_build_toml
from kernelnix.config.types import (
    CudaCapability,
    GitUrl,
    KernelName,
    RocmArch,
    VersionStr,
    check_cuda_capability,
    check_git_url,
    check_kernel_name,
    check_rocm_arch,
    json_schema_of,
    parse_major_minor,
)
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.metadata import metadata_schema

SHIPPED = ROOT / "kernelnix" / "data" / "schema"
CONFIGS = TESTS / "data" / "configs"
ACCEPTED = sorted(
    [p.parent for p in EXAMPLES.glob("*/build.toml")]
    + [p.parent for p in (CONFIGS / "good").glob("*/build.toml")]
)
BAD = sorted(p.parent for p in (CONFIGS / "bad").glob("*/build.toml"))

# Bad configs the schema accepts, and why only the loader refuses them.
ONLY_THE_LOADER = {
    # JSON Schema counts an integral float as an integer (and as the constant 5).
    "edition-float": "edition = 5.0",
}


def parsed(directory: Path) -> dict[str, Any] | None:
    """The TOML data of `directory`'s build.toml; None when it is not TOML at all."""
    try:
        return read_build_toml(directory / "build.toml")[1]
    except UserError:
        return None


def validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


@pytest.fixture(scope="module")
def build_toml() -> jsonschema.Draft202012Validator:
    return validator(build_toml_schema())


# --------------------------------------------------------------- the files


@pytest.mark.parametrize("document", sorted(SCHEMAS))
def test_the_shipped_schema_is_the_generated_one(
    document: str, request: pytest.FixtureRequest
) -> None:
    shipped = SHIPPED / f"{document}.schema.json"
    if request.config.getoption("--update-golden"):
        shipped.write_text(schema_text(document))
    assert shipped.read_text() == schema_text(document), "run pytest --update-golden"


@pytest.mark.parametrize("document", sorted(SCHEMAS))
def test_kernelnix_schema_prints_it(document: str) -> None:
    result = CliRunner().invoke(main, ["schema", document])
    assert result.exit_code == 0, result.output
    assert result.stdout == (SHIPPED / f"{document}.schema.json").read_text()


# ---------------------------------------------------------------- build.toml


@pytest.mark.parametrize("directory", ACCEPTED, ids=lambda d: f"{d.parent.name}/{d.name}")
def test_what_the_loader_accepts_the_schema_accepts(
    directory: Path, build_toml: jsonschema.Draft202012Validator
) -> None:
    load_config(directory)
    data = parsed(directory)
    assert data is not None
    assert [e.message for e in build_toml.iter_errors(data)] == []


# The bad configs that are TOML: an editor's TOML parser reports the others.
@pytest.mark.parametrize(
    "directory", [d for d in BAD if parsed(d) is not None], ids=lambda d: d.name
)
def test_what_the_loader_rejects_the_schema_rejects(
    directory: Path, build_toml: jsonschema.Draft202012Validator
) -> None:
    with pytest.raises(UserError):
        load_config(directory)
    data = parsed(directory)
    assert data is not None
    assert build_toml.is_valid(data) == (directory.name in ONLY_THE_LOADER)


def test_the_schema_names_the_key_and_the_rule(
    build_toml: jsonschema.Draft202012Validator,
) -> None:
    data = parsed(CONFIGS / "bad" / "name-uppercase")
    assert data is not None
    errors = list(build_toml.iter_errors(data))
    assert any("Relu" in e.message and "does not match" in e.message for e in errors), errors


def test_a_schema_line_is_a_comment_to_the_loader(tmp_path: Path) -> None:
    kernel = tmp_path / "kernel"
    shutil.copytree(CONFIGS / "good" / "v4-tvm-ffi", kernel)
    line = "#:schema ./build-toml.schema.json\n"
    toml = kernel / "build.toml"
    toml.write_text(line + toml.read_text())
    assert load_config(kernel).shape == "v4"
    result = CliRunner().invoke(main, ["update-build", str(kernel)])
    assert result.exit_code == 0, result.output
    assert toml.read_text().startswith(line)
    assert load_config(kernel).shape == "5"


TAPLO = shutil.which("taplo")


def taplo(*args: str | Path, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    assert TAPLO is not None
    return subprocess.run(
        [TAPLO, "lint", *map(str, args)], cwd=cwd, capture_output=True, text=True, timeout=120
    )


@pytest.mark.skipif(TAPLO is None, reason="taplo is not installed (npm install @taplo/cli)")
def test_taplo_checks_build_toml_with_the_schema(tmp_path: Path) -> None:
    """What Even Better TOML does in an editor: taplo with the schema, by a `#:schema`
    line or by `--schema`."""
    schema = (SHIPPED / "build-toml.schema.json").as_uri()
    # taplo refuses a byte-order mark, which kernelnix allows (docs/build-toml.md).
    good = [d / "build.toml" for d in ACCEPTED if d.name != "crlf-and-bom"]
    done = taplo("--schema", schema, *good)
    assert done.returncode == 0, done.stderr
    bad = [d / "build.toml" for d in BAD if parsed(d) is not None]
    done = taplo("--schema", schema, *bad)
    # Each error names its file: `┌─ <path>:<line>:<column>`.
    refused = {Path(p) for p in re.findall(r"┌─ (\S+?):\d+:\d+", done.stderr)}
    assert refused == {p for p in bad if p.parent.name not in ONLY_THE_LOADER}
    kernel = tmp_path / "kernel"
    shutil.copytree(CONFIGS / "bad" / "unknown-key-torch", kernel)
    shutil.copy(SHIPPED / "build-toml.schema.json", kernel)
    toml = kernel / "build.toml"
    toml.write_text("#:schema ./build-toml.schema.json\n" + toml.read_text())
    done = taplo(toml, cwd=tmp_path)
    assert done.returncode != 0
    assert "'srcs' was unexpected" in done.stderr


# A value type's pattern says what its validator says, but for these.
PATTERN_DIFFERS = {
    " https://github.com/org/repo",  # urlsplit (and the reference) strip the spaces
    "git@host:a://b",  # `://` in an scp path: a pattern without lookahead takes it
}
SAMPLES: dict[Any, tuple[Callable[[object], object], list[str]]] = {
    KernelName: (
        check_kernel_name,
        ["relu", "r2", "flash-attention", "r", "Relu", "relu-", "-relu", "1relu", "relü"],
    ),
    VersionStr: (
        parse_major_minor,
        ["12.6", " 12.6 ", "12.0", "12.08", "12", "12.8.1", "12.x", "12.", "", "+12.8", "١٢.٦"],
    ),
    CudaCapability: (
        check_cuda_capability,
        ["8.0", "9.0a", "10.0f", "9.0+PTX", "12.0a+PTX", "9.0b", "9", "9.0+ptx", "٨.0"],
    ),
    RocmArch: (
        check_rocm_arch,
        ["gfx90a", "gfx942", "gfx1100", "gfx90a:xnack+", "gfx90a:sramecc-:xnack+", "GFX90A"],
    ),
    GitUrl: (
        check_git_url,
        [
            "https://github.com/org/repo",
            "HTTPS://github.com/org/repo",
            "git+ssh://git@github.com:22/org/repo.git",
            "https://user:token@github.com/org/repo",
            "https://github.com/",
            "https://[::1]/repo",
            "https://github.com?x",
            "git@github.com:org/repo.git",
            "@host:org/repo",
            "a@b@host:path",
            "ftp://github.com/org/repo",
            "git+file:///tmp/repo",
            "github.com/org/repo",
            "git@github.com:/srv/repo",
            "https:///repo",
            "https://:80/repo",
            "https://[::1/repo",
            "user@host:",
            *PATTERN_DIFFERS,
        ],
    ),
}


@pytest.mark.parametrize("value_type", list(SAMPLES), ids=lambda t: json_schema_of(t)["title"])
def test_each_value_types_pattern_says_what_its_validator_says(value_type: Any) -> None:
    check, samples = SAMPLES[value_type]
    schema = validator(json_schema_of(value_type))
    for sample in samples:
        try:
            check(sample)
            accepted = True
        except ValueError:
            accepted = False
        assert (schema.is_valid(sample) == accepted) != (sample in PATTERN_DIFFERS), sample


# ------------------------------------------------------------- metadata.json


@pytest.fixture(scope="module")
def metadata() -> jsonschema.Draft202012Validator:
    return validator(metadata_schema())


@pytest.mark.parametrize(
    "example", sorted(EXAMPLES.glob("*/build.toml")), ids=lambda p: p.parent.name
)
def test_every_metadata_json_of_a_plan_is_valid(
    example: Path, metadata: jsonschema.Draft202012Validator
) -> None:
    plan = build_plan(load_config(example.parent), PlanOptions(unique_id="abc1234"))
    found = [v.metadata.to_data() for system in plan.variants.values() for v in system.values()]
    assert found
    for data in found:
        assert [e.message for e in metadata.iter_errors(data)] == []


GIT = {"commit": "a" * 40, "dirty": False}
SHA = {"sha": "a" * 40, "dirty": False}


@pytest.mark.parametrize(
    ("change", "valid"),
    [
        ({"extra": 1}, True),  # the loader ignores unknown top-level keys
        ({"version": "1"}, False),
        ({"version": -1}, False),
        ({"python-depends": "einops"}, False),
        ({"name": "Relu"}, False),
        ({"backend": {"type": "gpu"}}, False),
        ({"backend": {"type": "cuda", "arch": []}}, True),  # unknown keys: ignored, as the loader
        ({"kernel-depends": [{"repo-id": "org/x", "version": 1, "arch": []}]}, False),  # but here
        ({"digest": {"algorithm": "md5", "files": {}}}, False),
        ({"kernel-depends": [{"repo-id": "org/x", "version": 1, "revision": "a"}]}, False),
        ({"provenance": {"kernel-builder": {"version": "1"}, "kernel": GIT}}, True),
        ({"provenance": {"kernel-builder": {"version": "1"}, "kernel": SHA}}, True),  # older name
        ({"provenance": {"kernel-builder": {"version": "1"}, "kernel": GIT | SHA}}, False),
    ],
)
def test_metadata_json_rules(
    change: dict[str, Any], valid: bool, metadata: jsonschema.Draft202012Validator
) -> None:
    good = {
        "name": "relu",
        "id": "_relu_cpu_abc1234",
        "version": 1,
        "license": "Apache-2.0",
        "python-depends": [],
        "backend": {"type": "cpu"},
    }
    assert metadata.is_valid(good)
    assert metadata.is_valid({**good, **change}) == valid
