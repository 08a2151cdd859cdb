"""metadata.json: reference fields and order, python-depends table, the loader's parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernels._rust import Metadata as LoaderMetadata
from paths import EXAMPLES
from pydantic import ValidationError

from kernelnix.config import load_config
from kernelnix.config.issues import issues_of
from kernelnix.config.load import format_key_path
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.metadata import (
    Metadata,
    UnknownPythonDependency,
    metadata_for_backend,
    python_imports,
)

REFERENCE_ORDER = [
    "name",
    "id",
    "version",
    "license",
    "upstream",
    "source",
    "python-depends",
    "kernel-depends",
    "backend",
    "digest",
    "provenance",
]

FULL = """\
[general]
name = "relu-demo"
version = 3
edition = 5
license = "Apache-2.0"
upstream = "https://github.com/org/relu"
source = "git@github.com:org/relu-kernel.git"
backends = ["cpu", "cuda", "xpu", "tpu"]
python-depends = ["einops"]
kernel-depends = [{ repo-id = "kernels-community/activation", version = 1 }]
[general.cuda]
python-depends = ["nvidia-cutlass-dsl"]
kernel-depends = [{ repo-id = "org/helper", revision = "34fa" }]
[general.xpu]
python-depends = ["onednn"]
[torch-noarch]
cuda_capabilities = ["9.0", "10.0"]
"""


@pytest.fixture
def full(tmp_path: Path) -> Path:
    (tmp_path / "build.toml").write_text(FULL)
    return tmp_path


def test_fields_per_backend_in_reference_order(full: Path) -> None:
    config = load_config(full).config
    cuda = json.loads(
        metadata_for_backend(config, "cuda", "_relu_demo_cuda_x", ["9.0", "10.0"]).to_json_text()
    )
    assert list(cuda) == [k for k in REFERENCE_ORDER if k in cuda]
    assert cuda["python-depends"] == ["einops", "nvidia-cutlass-dsl"]
    assert cuda["kernel-depends"] == [
        {"repo-id": "kernels-community/activation", "version": 1},
        {"repo-id": "org/helper", "revision": "34fa"},
    ]
    assert cuda["backend"] == {"type": "cuda", "archs": ["9.0", "10.0"]}
    cpu = json.loads(metadata_for_backend(config, "cpu", "_relu_demo_cpu_x").to_json_text())
    assert cpu["python-depends"] == ["einops"] and "archs" not in cpu["backend"]
    assert cpu["kernel-depends"] == [{"repo-id": "kernels-community/activation", "version": 1}]
    assert cpu["upstream"] == "https://github.com/org/relu"


def test_loader_parses_what_we_write(full: Path) -> None:
    loaded = load_config(full)
    plan = build_plan(loaded, PlanOptions(unique_id="abc1234"))
    for system in plan.variants.values():
        for variant in system.values():
            text = json.dumps(variant.metadata).encode()
            parsed = LoaderMetadata.from_bytes(text)
            assert parsed.id == variant.ops_id
            assert str(parsed.name) == "relu-demo" or parsed.name.python_name == "relu_demo"


@pytest.mark.parametrize("example", sorted(p.parent.name for p in EXAMPLES.glob("*/build.toml")))
def test_every_example_metadata_is_accepted_by_the_loader(example: str) -> None:
    plan = build_plan(load_config(EXAMPLES / example), PlanOptions(unique_id="abc1234"))
    count = 0
    for system in plan.variants.values():
        for variant in system.values():
            LoaderMetadata.from_bytes(json.dumps(variant.metadata).encode())
            count += 1
    assert count > 0


def test_noarch_archs_come_from_torch_noarch(full: Path) -> None:
    plan = build_plan(load_config(full), PlanOptions(unique_id="abc1234"))
    variant = plan.variants["x86_64-linux"]["torch-cuda"]
    assert variant.metadata["backend"]["archs"] == ["9.0", "10.0"]
    assert variant.metadata["id"] == "_relu_demo_cuda_abc1234"
    assert plan.variants["x86_64-linux"]["torch-cpu"].metadata["id"] == ("_relu_demo_cpu_abc1234")


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ('python-depends = ["numpy"]', "unknown dependency 'numpy'"),
        (
            '[general.cuda]\npython-depends = ["nki"]',
            "unknown dependency 'nki' for backend 'cuda'",
        ),
        (
            '[general.tpu]\npython-depends = ["einops"]',
            "no Python dependencies are defined for backend 'tpu'",
        ),
    ],
)
def test_unknown_python_depends_are_errors(tmp_path: Path, extra: str, message: str) -> None:
    body = (
        '[general]\nname = "demo"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
        'backends = ["cuda", "tpu"]\n' + extra + "\n[torch-noarch]\n"
    )
    (tmp_path / "build.toml").write_text(body)
    config = load_config(tmp_path).config
    with pytest.raises(UnknownPythonDependency, match=message.replace("(", r"\(")):
        for backend in ("cuda", "tpu"):
            metadata_for_backend(config, backend, "_demo_x")


def test_python_imports_use_import_names() -> None:
    assert python_imports(["einops", "tvm-ffi", "nvidia-cutlass-dsl"], "cuda") == [
        "einops",
        "tvm_ffi",
        "cutlass",
    ]
    assert python_imports(["onednn"], "xpu") == []  # no import check, as upstream


def test_a_metadata_file_is_read_strictly_by_its_keys(full: Path) -> None:
    """What `kernelnix check` and `hash` report of a hand-edited metadata.json."""
    written = json.loads(
        metadata_for_backend(load_config(full).config, "cuda", "_relu_demo_cuda_x").to_json_text()
    )
    assert Metadata.validate(written).to_data(exclude_none=True) == written
    broken = {
        **written,
        "version": "3",
        "python_depends": written["python-depends"],
        "backend": {"type": "cuda", "archs": [9.0]},
        "kernel-depends": [{"repo-id": "org/x", "version": 1, "revision": "a"}],
    }
    del broken["python-depends"]
    with pytest.raises(ValidationError) as info:
        Metadata.validate(broken)
    found = {(format_key_path(i.loc), i.message) for i in issues_of(info.value, Metadata)}
    assert found == {
        ("version", "expected an integer, got string '3'"),
        ("python-depends", "required key is missing"),
        ("python_depends", "unknown key"),  # only the file's kebab-case spelling is a key
        ("backend.archs[0]", "expected a string, got float 9.0"),
        ("kernel-depends[0]", "`version` and `revision` are mutually exclusive; keep one of them"),
    }
