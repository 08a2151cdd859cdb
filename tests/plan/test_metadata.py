"""metadata.json: reference fields and order, python-depends table, the loader's parser."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from kernels._rust import Metadata as LoaderMetadata
from paths import EXAMPLES

from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.metadata import (
    KernelGit,
    Metadata,
    MetadataRead,
    loader_releases,
    metadata_schema,
    python_imports,
    read_metadata,
)
from kernelnix.plan.variant_metadata import (
    UnknownPythonDependency,
    kernels_minver_for,
    metadata_for_backend,
)

REFERENCE_ORDER = [
    "name",
    "id",
    "version",
    "kernels-minver",
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
        metadata_for_backend(
            config, "cuda", "arch", "_relu_demo_cuda_x", ["9.0", "10.0"]
        ).to_json_text()
    )
    assert list(cuda) == [k for k in REFERENCE_ORDER if k in cuda]
    assert cuda["python-depends"] == ["einops", "nvidia-cutlass-dsl"]
    assert cuda["kernel-depends"] == [
        {"repo-id": "kernels-community/activation", "version": 1},
        {"repo-id": "org/helper", "revision": "34fa"},
    ]
    assert cuda["backend"] == {"type": "cuda", "archs": ["9.0", "10.0"]}
    cpu = json.loads(metadata_for_backend(config, "cpu", "arch", "_relu_demo_cpu_x").to_json_text())
    assert cpu["python-depends"] == ["einops"] and "archs" not in cpu["backend"]
    assert cpu["kernel-depends"] == [{"repo-id": "kernels-community/activation", "version": 1}]
    assert cpu["upstream"] == "https://github.com/org/relu"


def test_loader_parses_what_we_write(full: Path) -> None:
    loaded = load_config(full)
    plan = build_plan(loaded, PlanOptions(unique_id="abc1234"))
    for system in plan.variants.values():
        for variant in system.values():
            text = variant.metadata.to_json_text().encode()
            parsed = LoaderMetadata.from_bytes(text)
            assert parsed.id == variant.ops_id
            assert str(parsed.name) == "relu-demo" or parsed.name.python_name == "relu_demo"


@pytest.mark.parametrize("example", sorted(p.parent.name for p in EXAMPLES.glob("*/build.toml")))
def test_every_example_metadata_is_accepted_by_the_loader(example: str) -> None:
    plan = build_plan(load_config(EXAMPLES / example), PlanOptions(unique_id="abc1234"))
    count = 0
    for system in plan.variants.values():
        for variant in system.values():
            LoaderMetadata.from_bytes(variant.metadata.to_json_text().encode())
            count += 1
    assert count > 0


def test_noarch_archs_come_from_torch_noarch(full: Path) -> None:
    plan = build_plan(load_config(full), PlanOptions(unique_id="abc1234"))
    variant = plan.variants["x86_64-linux"]["torch-cuda"]
    assert variant.metadata.backend.archs == variant.archs == ["9.0", "10.0"]
    assert variant.metadata.id == variant.ops_id == "_relu_demo_cuda_abc1234"
    assert plan.variants["x86_64-linux"]["torch-cpu"].metadata.id == "_relu_demo_cpu_abc1234"


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
            metadata_for_backend(config, backend, "arch", "_demo_x")


def test_python_imports_use_import_names() -> None:
    assert python_imports(["einops", "tvm-ffi", "nvidia-cutlass-dsl"], "cuda") == [
        "einops",
        "tvm_ffi",
        "cutlass",
    ]
    assert python_imports(["onednn"], "xpu") == []  # no import check, as upstream


def _written(full: Path) -> dict:
    config = load_config(full).config
    return json.loads(
        metadata_for_backend(config, "cuda", "arch", "_relu_demo_cuda_x").to_json_text()
    )


def _read(tmp_path: Path, data: object) -> MetadataRead:
    (tmp_path / "metadata.json").write_text(json.dumps(data))
    return read_metadata(tmp_path)


def _loader_accepts(data: dict) -> bool:
    try:
        LoaderMetadata.from_bytes(json.dumps(data).encode())
    except ValueError:
        return False
    return True


def test_a_metadata_file_is_read_by_its_kebab_case_keys(full: Path, tmp_path: Path) -> None:
    """What `kernelnix check` and `hash` report of a hand-edited metadata.json."""
    written = _written(full)
    assert _read(tmp_path, written).model == Metadata.validate(written)
    broken = {
        **written,
        "version": "3",
        "python_depends": written["python-depends"],  # not a key: ignored, as the loader does
        "backend": {"type": "cuda", "archs": [9.0]},
        "kernel-depends": [{"repo-id": "org/x", "version": 1, "revision": "a"}],
    }
    del broken["python-depends"]
    read = _read(tmp_path, broken)
    assert read.model is None and read.raw == broken
    assert {(p.key, p.message) for p in read.problems} == {
        ("version", "expected an integer, got string '3'"),
        ("python-depends", "required key is missing"),
        ("backend.archs[0]", "expected a string, got float 9.0"),
        ("kernel-depends[0]", "`version` and `revision` are mutually exclusive; keep one of them"),
    }
    assert not _loader_accepts(broken)


def test_unknown_keys_are_ignored_where_the_loader_ignores_them(full: Path, tmp_path: Path) -> None:
    written = _written(full)
    provenance = {
        "kernel-builder": {"version": "x", "later": 1},
        "kernel": {"commit": "a" * 40, "dirty": False, "later": 1},
        "later": {},
    }
    extended = {
        **written,
        "later": "0.12.0",
        "backend": {**written["backend"], "later": True},
        "provenance": provenance,
    }
    assert _loader_accepts(extended)
    read = _read(tmp_path, extended)
    assert read.problems == () and read.model is not None
    assert read.raw == extended  # kept as written, for `hash` to rewrite
    assert "later" not in read.model.to_data()
    # In a kernel-depends entry the loader refuses an unknown key, and so does kernelnix.
    depends = {**written, "kernel-depends": [{"repo-id": "org/x", "version": 1, "later": 1}]}
    assert not _loader_accepts(depends)
    assert [(p.key, p.message) for p in _read(tmp_path, depends).problems] == [
        ("kernel-depends[0].later", "unknown key")
    ]


def test_sha_is_read_as_the_older_name_of_commit(full: Path, tmp_path: Path) -> None:
    kernel = {"sha": "b" * 40, "dirty": True}
    legacy = {
        **_written(full),
        "provenance": {"kernel-builder": {"version": "x"}, "kernel": kernel},
    }
    assert _loader_accepts(legacy)
    model = _read(tmp_path, legacy).model
    assert model is not None and model.provenance is not None
    assert model.provenance.kernel == KernelGit(commit="b" * 40, dirty=True)
    assert model.to_data()["provenance"]["kernel"] == {"commit": "b" * 40, "dirty": True}
    both = {**legacy, "provenance": {**legacy["provenance"], "kernel": {**kernel, "commit": "c"}}}
    assert not _loader_accepts(both)
    assert [p.key for p in _read(tmp_path, both).problems] == ["provenance.kernel"]


@pytest.mark.parametrize(
    ("content", "error"),
    [
        (None, "missing"),
        ("[1]", "expected a JSON object, found list"),
        ("{", "unreadable: Expecting property name"),
    ],
)
def test_a_file_that_is_no_json_object_is_named_so(
    tmp_path: Path, content: str | None, error: str
) -> None:
    if content is not None:
        (tmp_path / "metadata.json").write_text(content)
    read = read_metadata(tmp_path)
    assert read.raw is None and read.error is not None and read.error.startswith(error)
    with pytest.raises(UserError, match=r"metadata\.json"):
        read.valid(fix="rebuild")


def test_the_schema_allows_unknown_keys_where_the_model_does() -> None:
    schema = metadata_schema()
    assert schema["additionalProperties"] is True
    for name, table in schema["$defs"].items():
        expected = name != "KernelDependencyRef"
        assert table["additionalProperties"] is expected, name


def test_kernels_minver_comes_from_the_kind_and_kernel_depends(full: Path) -> None:
    """The full kernel has kernel-depends: every variant needs the first loader that
    resolves them; without them, the first loader that knows the variant's name."""
    releases = loader_releases()
    plan = build_plan(load_config(full), PlanOptions(unique_id="abc1234"))
    for variant in plan.variants["x86_64-linux"].values():
        written = json.loads(variant.metadata.to_json_text())
        assert written["kernels-minver"] == releases["features"]["kernel-depends"] == "0.17.0"
        loaded = LoaderMetadata.from_bytes(variant.metadata.to_json_text().encode())
        assert str(loaded.kernels_minver) == "0.17.0"
    plain = build_plan(load_config(EXAMPLES / "relu-noarch"), PlanOptions(unique_id="abc1234"))
    assert plain.variants["x86_64-linux"]["torch-cpu"].metadata.kernels_minver == "0.11.2"
    assert kernels_minver_for("stable-abi", []) == releases["variant-kinds"]["stable-abi"]


def test_metadata_reader_accepts_kernels_minver_and_refuses_a_bad_one(
    full: Path, tmp_path: Path
) -> None:
    written = _written(full)
    assert _read(tmp_path, written).model is not None
    bad = _read(tmp_path, {**written, "kernels-minver": "0.17"})
    assert bad.model is None and [p.key for p in bad.problems] == ["kernels-minver"]
    assert not _loader_accepts({**written, "kernels-minver": "0.17"})
