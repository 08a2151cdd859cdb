"""Variants of a config: the reference rules, table-driven over synthetic build.toml files."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
from paths import EXAMPLES

from kernelnix.config import load_config
from kernelnix.core.version import Version
from kernelnix.variants.enumerate import best_variant, variants_for_system
from kernelnix.variants.matrix import load_matrix
from kernelnix.variants.names import VariantName, parse_variant_name

GENERAL = """\
[general]
name = "demo"
version = 1
edition = 5
license = "Apache-2.0"
backends = {backends}
{extra}
"""

KERNELS = {
    "cpu": '[kernel.k_cpu]\nbackend = "cpu"\ndepends = ["torch"]\nsrc = ["k.cpp"]\n',
    "cuda": '[kernel.k_cuda]\nbackend = "cuda"\ndepends = ["torch"]\nsrc = ["k.cu"]\n',
    "rocm": '[kernel.k_rocm]\nbackend = "rocm"\ndepends = ["torch"]\nsrc = ["k.cu"]\n',
    "xpu": '[kernel.k_xpu]\nbackend = "xpu"\ndepends = ["torch"]\nsrc = ["k.cpp"]\n',
    "metal": '[kernel.k_metal]\nbackend = "metal"\ndepends = ["torch"]\nsrc = ["k.mm"]\n',
}


def write_config(
    tmp_path: Path,
    backends: list[str],
    *,
    kernels: list[str] | None = None,
    general_extra: str = "",
    framework: str = '[torch]\nsrc = ["b.cpp"]\n',
) -> Path:
    text = GENERAL.format(backends=str(backends).replace("'", '"'), extra=general_extra)
    text += framework
    for backend in backends if kernels is None else kernels:
        text += KERNELS.get(backend, "")
    (tmp_path / "build.toml").write_text(text)
    return tmp_path


def names(tmp_path: Path, system: str = "x86_64-linux") -> list[str]:
    return variants_for_system(load_config(tmp_path).config, system).names()


ALL_X86 = [
    "torch211-cxx11-cpu-x86_64-linux",
    "torch212-cxx11-cpu-x86_64-linux",
    "torch212-cxx11-cu126-x86_64-linux",
    "torch212-cxx11-cu130-x86_64-linux",
    "torch212-cxx11-cu132-x86_64-linux",
    "torch212-cxx11-rocm71-x86_64-linux",
    "torch212-cxx11-rocm72-x86_64-linux",
    "torch212-cxx11-xpu20253-x86_64-linux",
    "torch213-cxx11-cpu-x86_64-linux",
    "torch213-cxx11-cu126-x86_64-linux",
    "torch213-cxx11-cu130-x86_64-linux",
    "torch213-cxx11-cu132-x86_64-linux",
    "torch213-cxx11-rocm71-x86_64-linux",
    "torch213-cxx11-rocm72-x86_64-linux",
    "torch213-cxx11-xpu20260-x86_64-linux",
    "torch214-cxx11-cpu-x86_64-linux",
    "torch214-cxx11-cu126-x86_64-linux",
    "torch214-cxx11-cu130-x86_64-linux",
    "torch214-cxx11-cu132-x86_64-linux",
    "torch214-cxx11-rocm72-x86_64-linux",
    "torch214-cxx11-xpu20261-x86_64-linux",
    "torch215-cxx11-cpu-x86_64-linux",
    "torch215-cxx11-cu132-x86_64-linux",
]
CPU_X86 = [n for n in ALL_X86 if "-cpu-" in n]

CASES = {
    "all backends, x86_64": (["cpu", "cuda", "rocm", "xpu", "metal"], "", None, ALL_X86),
    "cpu only": (["cpu"], "", None, CPU_X86),
    "cuda minver inclusive": (
        ["cuda"],
        '[general.cuda]\nminver = "13.0"\n',
        None,
        [n for n in ALL_X86 if "-cu13" in n],
    ),
    "cuda maxver inclusive": (
        ["cuda"],
        '[general.cuda]\nmaxver = "12.6"\n',
        None,
        [n for n in ALL_X86 if "-cu126" in n],
    ),
    "cuda window excludes all": (
        ["cuda"],
        '[general.cuda]\nminver = "12.7"\nmaxver = "12.9"\n',
        None,
        [],
    ),
    "torch minver": (
        ["cpu"],
        "",
        '[torch]\nsrc = ["b.cpp"]\nminver = "2.13"\n',
        [
            "torch213-cxx11-cpu-x86_64-linux",
            "torch214-cxx11-cpu-x86_64-linux",
            "torch215-cxx11-cpu-x86_64-linux",
        ],
    ),
    "torch maxver": (
        ["cpu"],
        "",
        '[torch]\nsrc = ["b.cpp"]\nmaxver = "2.12"\n',
        ["torch211-cxx11-cpu-x86_64-linux", "torch212-cxx11-cpu-x86_64-linux"],
    ),
    # The reference's worked example: 3 CUDA (torch 2.13), 1 CPU, 2 ROCm, 2 XPU.
    "stable abi everywhere": (
        ["cpu", "cuda", "rocm", "xpu"],
        "",
        '[torch]\nsrc = ["b.cpp"]\nstable-abi = "2.12"\n',
        [
            "torch-stable-abi212-cpu-x86_64-linux",
            "torch-stable-abi212-cu126-x86_64-linux",
            "torch-stable-abi212-cu130-x86_64-linux",
            "torch-stable-abi212-cu132-x86_64-linux",
            "torch-stable-abi212-rocm71-x86_64-linux",
            "torch-stable-abi212-rocm72-x86_64-linux",
            "torch-stable-abi212-xpu20253-x86_64-linux",
            "torch-stable-abi212-xpu20260-x86_64-linux",
            "torch-stable-abi212-xpu20261-x86_64-linux",
        ],
    ),
    "stable abi newer than some torch": (
        ["xpu"],
        "",
        '[torch]\nsrc = ["b.cpp"]\nstable-abi = "2.13"\n',
        [
            "torch-stable-abi213-xpu20260-x86_64-linux",
            "torch-stable-abi213-xpu20261-x86_64-linux",
        ],
    ),
    "stable abi per backend": (
        ["cpu", "cuda"],
        "",
        '[torch]\nsrc = ["b.cpp"]\n[torch.stable-abi]\ncpu = "2.12"\n',
        [
            "torch-stable-abi212-cpu-x86_64-linux",
            *(n for n in ALL_X86 if "-cu1" in n),
        ],
    ),
    "noarch framework": (
        ["cpu", "cuda", "metal"],
        "",
        "[torch-noarch]\n",
        ["torch-cpu", "torch-cuda"],
    ),
    "torch backend without kernel is noarch": (
        ["cpu", "xpu"],
        "",
        None,
        [*CPU_X86, "torch-xpu"],
    ),
    "tvm-ffi": (
        ["cpu", "cuda"],
        "",
        '[tvm-ffi]\nsrc = ["b.cpp"]\n',
        [
            "tvm-ffi01-cpu-x86_64-linux",
            "tvm-ffi01-cu126-x86_64-linux",
            "tvm-ffi01-cu130-x86_64-linux",
            "tvm-ffi01-cu132-x86_64-linux",
        ],
    ),
    # TPU has a build set (Torch 2.11) but no kernel backend: always noarch.
    "tpu is noarch": (["tpu"], "", None, ["torch-tpu"]),
    "backend without build sets": (["neuron"], "", None, []),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_variant_rules(tmp_path: Path, case: str) -> None:
    backends, extra, framework, expected = CASES[case]
    kernels = ["cpu"] if case == "torch backend without kernel is noarch" else None
    write_config(
        tmp_path,
        backends,
        kernels=kernels,
        general_extra=extra,
        **({"framework": framework} if framework else {}),
    )
    assert sorted(names(tmp_path)) == sorted(expected)


def test_darwin_names_have_no_abi_tag(tmp_path: Path) -> None:
    write_config(tmp_path, ["cpu", "cuda", "metal"])
    assert names(tmp_path, "aarch64-darwin") == [
        "torch212-cpu-aarch64-darwin",
        "torch212-metal-aarch64-darwin",
        "torch213-cpu-aarch64-darwin",
        "torch213-metal-aarch64-darwin",
        "torch214-cpu-aarch64-darwin",
        "torch214-metal-aarch64-darwin",
        "torch215-cpu-aarch64-darwin",
        "torch215-metal-aarch64-darwin",
    ]


def test_aarch64_linux_has_cpu_and_cuda_only(tmp_path: Path) -> None:
    write_config(tmp_path, ["cpu", "cuda", "rocm", "xpu"])
    assert names(tmp_path, "aarch64-linux") == [
        n.replace("x86_64", "aarch64")
        for n in ALL_X86
        if "rocm" not in n and "xpu" not in n and "torch211" not in n  # 2.11: x86_64 only
    ]


def test_tvm_ffi_collision_is_reported_and_resolved_by_newest_torch(tmp_path: Path) -> None:
    write_config(tmp_path, ["cuda"], framework='[tvm-ffi]\nsrc = ["b.cpp"]\n')
    found = variants_for_system(load_config(tmp_path).config, "x86_64-linux")
    [collision] = found.collisions
    assert collision.name == "tvm-ffi01-cu132-x86_64-linux"
    assert collision.kept.torch == Version.parse("2.13")
    assert [b.torch for b in collision.dropped] == [Version.parse("2.12")]
    assert "2 build sets give this name" in collision.describe()


def test_stable_abi_drop_is_noted(tmp_path: Path) -> None:
    write_config(tmp_path, ["xpu"], framework='[torch]\nsrc = ["b.cpp"]\nstable-abi = "2.13"\n')
    found = variants_for_system(load_config(tmp_path).config, "x86_64-linux")
    assert any("older than the stable-ABI target 2.13" in n for n in found.notes)


def test_backend_without_build_set_is_noted(tmp_path: Path) -> None:
    write_config(tmp_path, ["cpu", "neuron"])
    found = variants_for_system(load_config(tmp_path).config, "x86_64-linux")
    assert any("'neuron' has no build set" in n for n in found.notes)


def test_best_variant_prefers_cuda_newest_torch_oldest_cuda(tmp_path: Path) -> None:
    write_config(tmp_path, ["cpu", "cuda", "rocm"])
    found = variants_for_system(load_config(tmp_path).config, "x86_64-linux")
    best = best_variant(found.variants)
    # Bundle first: Torch 2.15 is outside the bundle, so the newest is 2.14.
    assert best is not None and best.name == "torch214-cxx11-cu126-x86_64-linux"
    write_config(tmp_path, ["cpu"])
    found = variants_for_system(load_config(tmp_path).config, "x86_64-linux")
    assert best_variant(found.variants).name == "torch214-cxx11-cpu-x86_64-linux"  # type: ignore[union-attr]


def test_bundle_of_every_backend_matches_reference_list(tmp_path: Path) -> None:
    """The 38 bundle variants the reference lists (its build-variants.json: Torch 2.12 and
    2.13, 13 each; 2.14, 12)."""
    write_config(tmp_path, ["cpu", "cuda", "rocm", "xpu", "metal"])
    config = load_config(tmp_path).config
    every = [
        v.name
        for s in load_matrix().systems
        for v in variants_for_system(config, s).variants
        if v.bundle
    ]
    assert len(every) == 38
    assert len(set(every)) == 38
    assert not any(name.startswith(("torch211", "torch215")) for name in every)


@pytest.mark.parametrize("build_set", load_matrix().build_sets, ids=lambda b: b.describe())
def test_variant_names_round_trip_through_the_loader_grammar(build_set: object) -> None:
    for system in build_set.systems:  # type: ignore[attr-defined]
        for kind, version in (
            ("arch", build_set.torch),  # type: ignore[attr-defined]
            ("stable-abi", Version.parse("2.12")),
        ):
            name = VariantName(
                kind,
                build_set.backend,
                build_set.version,  # type: ignore[attr-defined]
                version,
                system,
            )
            parsed = parse_variant_name(name.render())
            assert parsed.render() == name.render()
            assert (parsed.kind, parsed.backend, parsed.system) == (kind, name.backend, system)


def test_variant_names_match_the_kernels_loader_parser() -> None:
    from kernels.variants import parse_variant  # the real loader's grammar

    for build_set in load_matrix().build_sets:
        for system in build_set.systems:
            for kind, version in (
                ("arch", build_set.torch),
                ("stable-abi", build_set.torch),
                ("tvm-ffi", Version.parse("0.1")),
            ):
                name = VariantName(
                    kind, build_set.backend, build_set.version, version, system
                ).render()
                assert parse_variant(name).variant_str == name


def test_matrix_data_has_the_issue_versions() -> None:
    matrix = load_matrix()
    have = {
        (b.torch.major_minor(), b.backend, b.version.major_minor() if b.version else None)
        for b in matrix.build_sets
    }
    for torch in ("2.12", "2.13"):
        for backend, version in (
            ("cpu", None),
            ("cuda", "12.6"),
            ("cuda", "13.0"),
            ("cuda", "13.2"),
            ("rocm", "7.1"),
            ("rocm", "7.2"),
            ("metal", None),
        ):
            assert (torch, backend, version) in have
    assert ("2.12", "xpu", "2025.3") in have and ("2.13", "xpu", "2026.0") in have
    assert set(matrix.systems) == {"x86_64-linux", "aarch64-linux", "aarch64-darwin"}


def test_example_variant_lists_are_golden(golden: object) -> None:
    root = EXAMPLES
    for example in sorted(p.parent for p in root.glob("*/build.toml")):
        config = load_config(example).config
        lines = [
            f"{s} {n}"
            for s in load_matrix().systems
            for n in variants_for_system(config, s).names()
        ]
        golden(f"variants/{example.name}.txt", textwrap.dedent("\n".join(lines)) + "\n")  # type: ignore[operator]
