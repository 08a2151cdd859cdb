"""Loading build.toml: every field and rule of edition 5, the v4 and v3 shapes, diagnostics."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from paths import EXAMPLES

from kernelnix.config import BuildConfig, LoadedConfig, load_config
from kernelnix.config.model import CpuKernel, CudaKernel, MetalKernel, RocmKernel, XpuKernel
from kernelnix.config.types import BACKENDS, DEPENDENCIES
from kernelnix.core.diagnostics import Diagnostic, UserError
from kernelnix.core.version import Version

GENERAL = """\
[general]
name = "relu"
version = 1
edition = 5
license = "Apache-2.0"
backends = ["cpu", "cuda", "metal", "rocm", "xpu"]
"""
"""Six lines: an edition-5 [general] table; anything appended starts on line 7."""

TORCH = '\n[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'


def toml(text: str) -> str:
    return textwrap.dedent(text).lstrip("\n")


def write(directory: Path, text: str | bytes) -> Path:
    path = directory / "build.toml"
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text, encoding="utf-8")
    return directory


def load(directory: Path, text: str | bytes) -> LoadedConfig:
    return load_config(write(directory, text))


def errors(directory: Path, text: str | bytes) -> list[Diagnostic]:
    with pytest.raises(UserError) as info:
        load(directory, text)
    diagnostics = info.value.diagnostics
    assert diagnostics, "a UserError must carry at least one diagnostic"
    assert all(d.severity == "error" for d in diagnostics)
    assert all(d.file and d.file.endswith("build.toml") for d in diagnostics)
    return diagnostics


def one_error(directory: Path, text: str | bytes) -> Diagnostic:
    found = errors(directory, text)
    assert len(found) == 1, [d.render() for d in found]
    return found[0]


def where(diagnostics: list[Diagnostic]) -> list[tuple[str | None, int | None]]:
    return [(d.key, d.line) for d in diagnostics]


# ------------------------------------------------------------- editions


def test_minimal_edition5(tmp_path: Path) -> None:
    loaded = load(tmp_path, GENERAL + TORCH)
    assert loaded.shape == "5"
    assert loaded.warnings == []
    assert loaded.path == tmp_path / "build.toml"
    config = loaded.config
    assert isinstance(config, BuildConfig)
    assert config.general.name == "relu"
    assert config.general.version == 1
    assert config.general.edition == 5
    assert config.general.license == "Apache-2.0"
    assert config.framework == "torch"
    assert config.torch is not None and config.torch.src == ["torch-ext/torch_binding.cpp"]
    assert config.kernel == {}


V4 = toml(
    """
    [general]
    name = "relu"
    version = 1
    license = "Apache-2.0"
    backends = ["cuda"]

    [torch]
    src = ["torch-ext/torch_binding.cpp"]
    stable-abi = "2.11"
    """
)


def test_v4_loads_with_a_warning_naming_update_build(tmp_path: Path) -> None:
    loaded = load(tmp_path, V4)
    assert loaded.shape == "v4"
    (warning,) = loaded.warnings
    assert warning.severity == "warning"
    assert "v4" in warning.message
    assert "kernelnix update-build" in (warning.fix or "")
    assert loaded.config.general.edition == 5
    assert loaded.config.torch is not None
    # A v4 string stable-abi means every backend.
    for backend in BACKENDS:
        assert loaded.config.torch.stable_abi_for(backend) == Version((2, 11))


def test_v4_and_its_edition5_twin_normalize_the_same(tmp_path: Path) -> None:
    v4 = load(tmp_path, V4)
    v5 = load(tmp_path, V4.replace("version = 1\n", "version = 1\nedition = 5\n"))
    assert v5.shape == "5"
    assert v4.config == v5.config


def test_v3_with_license_loads_and_gets_version_and_noarch(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        toml(
            """
            [general]
            name = "relu"
            license = "MIT"
            backends = ["cuda"]
            """
        ),
    )
    assert loaded.shape == "v3"
    assert "v3" in loaded.warnings[0].message
    assert "kernelnix update-build" in (loaded.warnings[0].fix or "")
    assert loaded.config.general.version == 1
    assert loaded.config.framework == "torch-noarch"


def test_v3_keeps_its_torch_section(tmp_path: Path) -> None:
    loaded = load(
        tmp_path,
        '[general]\nname = "relu"\nlicense = "MIT"\nbackends = ["cuda"]\n' + TORCH,
    )
    assert loaded.shape == "v3"
    assert loaded.config.framework == "torch"
    assert loaded.config.torch is not None and loaded.config.torch.stable_abi is None


def test_v3_without_license_names_the_key_to_add(tmp_path: Path) -> None:
    error = one_error(tmp_path, '[general]\nname = "relu"\nbackends = ["cuda"]\n' + TORCH)
    assert (error.key, error.line) == ("general", 1)
    assert "`license`" in error.message
    assert 'license = "' in (error.fix or "")


@pytest.mark.parametrize("edition", [0, 1, 3, 4, 6, 100])
def test_editions_other_than_5_name_the_supported_ones(tmp_path: Path, edition: int) -> None:
    error = one_error(tmp_path, GENERAL.replace("edition = 5", f"edition = {edition}") + TORCH)
    assert (error.key, error.line) == ("general.edition", 4)
    assert f"unsupported build.toml edition {edition}" in error.message
    assert "supports edition 5" in error.message
    assert "edition = 5" in (error.fix or "")


@pytest.mark.parametrize(
    ("spelling", "found"), [('"5"', "string '5'"), ("5.0", "float 5.0"), ("true", "boolean True")]
)
def test_edition_must_be_an_integer(tmp_path: Path, spelling: str, found: str) -> None:
    error = one_error(tmp_path, GENERAL.replace("edition = 5", f"edition = {spelling}") + TORCH)
    assert (error.key, error.line) == ("general.edition", 4)
    assert f"expected an integer edition, got {found}" in error.message


def test_edition5_features_without_edition_say_add_it(tmp_path: Path) -> None:
    text = V4 + "\n[general.tpu]\npython-depends = []\n"
    error = one_error(tmp_path, text)
    assert error.key == "general"
    assert "add `edition = 5`" in (error.fix or "")


# ------------------------------------------------------------- [general]


def test_general_keys_of_edition5(tmp_path: Path) -> None:
    config = load(
        tmp_path,
        toml(
            """
            [general]
            name = "flash-attention"
            version = 0
            edition = 5
            license = "BSD-3-Clause"
            upstream = "https://github.com/org/flash"
            source = "git@github.com:org/flash-kernel.git"
            backends = ["cuda", "cpu", "cuda", "neuron", "tpu"]
            python-depends = ["einops"]
            kernel-depends = [{ repo-id = "org/a", version = 2 }]

            [general.hub]
            repo-id = "org/flash"
            branch = "dev"

            [general.cuda]
            minver = "12.6"
            maxver = "13.0"
            python-depends = ["nvidia-cutlass-dsl"]
            kernel-depends = [{ repo-id = "org/b", revision = "abc123" }]

            [general.neuron]
            python-depends = ["nki"]
            kernel-depends = [{ repo-id = "org/c", version = 0 }]

            [general.xpu]
            python-depends = ["onednn"]

            [general.tpu]
            python-depends = ["jax"]

            [torch-noarch]
            """
        ),
    ).config
    general = config.general
    assert general.python_name == "flash_attention"
    assert general.version == 0
    assert general.upstream == "https://github.com/org/flash"
    assert general.source == "git@github.com:org/flash-kernel.git"
    assert general.backends == ["cuda", "cpu", "cuda", "neuron", "tpu"]
    assert config.backends == ["cuda", "cpu", "neuron", "tpu"]  # duplicates dropped, order kept
    assert general.python_depends == ["einops"]
    assert [(d.repo_id, d.version, d.revision) for d in general.kernel_depends] == [
        ("org/a", 2, None)
    ]
    assert general.hub is not None and (general.hub.repo_id, general.hub.branch) == (
        "org/flash",
        "dev",
    )
    assert general.cuda is not None
    assert (general.cuda.minver, general.cuda.maxver) == (Version((12, 6)), Version((13,)))
    assert general.cuda.python_depends == ["nvidia-cutlass-dsl"]
    assert [(d.repo_id, d.revision) for d in general.cuda.kernel_depends] == [("org/b", "abc123")]
    assert general.neuron is not None and general.neuron.kernel_depends[0].version == 0
    assert general.xpu is not None and general.xpu.python_depends == ["onednn"]
    assert general.tpu is not None and general.tpu.python_depends == ["jax"]


@pytest.mark.parametrize("key", ["name", "version", "license", "backends"])
def test_required_general_keys(tmp_path: Path, key: str) -> None:
    lines = [line for line in GENERAL.splitlines(keepends=True) if not line.startswith(key)]
    error = one_error(tmp_path, "".join(lines) + TORCH)
    assert (error.key, error.line) == (f"general.{key}", 1)
    assert f"required key `{key}` is missing in [general]" in error.message
    assert f"add `{key} = " in (error.fix or "")


def test_every_backend_is_accepted(tmp_path: Path) -> None:
    backends = ", ".join(f'"{b}"' for b in BACKENDS)
    text = GENERAL.replace('"cpu", "cuda", "metal", "rocm", "xpu"', backends)
    config = load(tmp_path, text + "\n[torch-noarch]\n")
    assert config.config.backends == list(BACKENDS)


def test_unknown_backends_are_each_reported_with_a_suggestion(tmp_path: Path) -> None:
    found = errors(
        tmp_path, GENERAL.replace('"cpu", "cuda"', '"cpu", "CUDA", "tensor", "cuda"') + TORCH
    )
    assert where(found) == [("general.backends[1]", 6), ("general.backends[2]", 6)]
    assert "unknown backend 'CUDA'" in found[0].message
    assert found[0].fix == "did you mean 'cuda'?"
    assert "expected one of: " + ", ".join(BACKENDS) in found[1].message


@pytest.mark.parametrize(
    ("line", "key", "fragment"),
    [
        ('name = "Relu"', "general.name", "invalid kernel name 'Relu'"),
        ('name = "r"', "general.name", "at least 2 characters"),
        ("version = -1", "general.version", "expected a non-negative integer, got -1"),
        ('version = "1"', "general.version", "expected an integer, got string '1'"),
        ("license = 2", "general.license", "expected a string, got integer 2"),
        ('backends = "cuda"', "general.backends", "expected an array, got string 'cuda'"),
    ],
)
def test_wrong_general_values(tmp_path: Path, line: str, key: str, fragment: str) -> None:
    name = line.split(" =")[0]
    text = "".join(
        line + "\n" if old.startswith(f"{name} =") else old
        for old in GENERAL.splitlines(keepends=True)
    )
    error = one_error(tmp_path, text + TORCH)
    assert error.key == key
    assert error.line == next(i for i, old in enumerate(text.splitlines(), 1) if old == line)
    assert fragment in error.message


@pytest.mark.parametrize(
    "url",
    ["https://github.com/org/relu", "ssh://git@host/org/relu", "git@github.com:org/relu.git"],
)
@pytest.mark.parametrize("key", ["upstream", "source"])
def test_git_urls_accepted(tmp_path: Path, key: str, url: str) -> None:
    config = load(tmp_path, GENERAL + f'{key} = "{url}"\n' + TORCH).config
    assert getattr(config.general, key) == url


@pytest.mark.parametrize(
    ("url", "fragment"),
    [
        ("ftp://github.com/org/relu", "unsupported scheme 'ftp'"),
        ("github.com/org/relu", "invalid git URL"),
        ("git@github.com:/abs/path", "invalid git URL"),
    ],
)
def test_git_urls_rejected(tmp_path: Path, url: str, fragment: str) -> None:
    error = one_error(tmp_path, GENERAL + f'upstream = "{url}"\n' + TORCH)
    assert (error.key, error.line) == ("general.upstream", 7)
    assert fragment in error.message


def test_v4_has_no_kernel_depends_and_v3_no_source(tmp_path: Path) -> None:
    v4 = V4.replace('backends = ["cuda"]', 'backends = ["cuda"]\nkernel-depends = []')
    assert one_error(tmp_path, v4).key == "general"  # edition-5 key without edition
    v3 = '[general]\nname = "relu"\nlicense = "MIT"\nbackends = ["cuda"]\nsource = "https://h/r"\n'
    with pytest.raises(UserError):
        load(tmp_path, v3 + TORCH)


# --------------------------------------------------------- kernel-depends


def test_kernel_depends_version_or_revision(tmp_path: Path) -> None:
    text = GENERAL + toml(
        """
        kernel-depends = [
            { repo-id = "org/a", version = 1 },
            { repo-id = "org/b", revision = "main" },
        ]
        """
    )
    deps = load(tmp_path, text + TORCH).config.general.kernel_depends
    assert [(d.repo_id, d.version, d.revision) for d in deps] == [
        ("org/a", 1, None),
        ("org/b", None, "main"),
    ]


def test_kernel_depends_rules_are_all_reported(tmp_path: Path) -> None:
    text = GENERAL + toml(
        """
        kernel-depends = [
            { repo-id = "org/a", version = 1, revision = "main" },
            { repo-id = "org/b" },
            { repo-id = "org/c", version = "2" },
            { repo-id = "org/d", version = -1 },
            { repo-id = "org/e", version = 1, tag = "x" },
        ]
        """
    )
    found = errors(tmp_path, text + TORCH)
    assert where(found) == [
        ("general.kernel-depends[0]", 8),
        ("general.kernel-depends[1]", 9),
        ("general.kernel-depends[2].version", 10),
        ("general.kernel-depends[3].version", 11),
        ("general.kernel-depends[4].tag", 12),
    ]
    assert "mutually exclusive" in found[0].message
    assert "either `version`" in found[1].message
    assert "expected an integer" in found[2].message
    assert "non-negative" in found[3].message
    assert "valid keys here: repo-id, version, revision" in (found[4].fix or "")


def test_tpu_has_no_kernel_depends(tmp_path: Path) -> None:
    text = GENERAL + "\n[general.tpu]\nkernel-depends = []\n" + TORCH
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == ("general.tpu.kernel-depends", 9)
    assert "valid keys here: python-depends" in (error.fix or "")


# ---------------------------------------------------------------- [torch]


def test_torch_keys(tmp_path: Path) -> None:
    torch = load(
        tmp_path,
        GENERAL
        + toml(
            """
            [torch]
            src = ["a.cpp", "a.h"]
            include = ["include"]
            minver = "2.9"
            maxver = "2.12"
            pyext = ["py", "json"]
            cxx-flags = ["-O3"]
            """
        ),
    ).config.torch
    assert torch is not None
    assert torch.src == ["a.cpp", "a.h"]
    assert torch.include == ["include"]
    assert (torch.minver, torch.maxver) == (Version((2, 9)), Version((2, 12)))
    assert torch.pyext == ["py", "json"]
    assert torch.cxx_flags == ["-O3"]
    assert torch.stable_abi is None and torch.stable_abi_for("cuda") is None


def test_torch_defaults(tmp_path: Path) -> None:
    torch = load(tmp_path, GENERAL + "\n[torch]\n").config.torch
    assert torch is not None
    assert (torch.src, torch.include, torch.cxx_flags, torch.pyext) == ([], [], [], None)


def test_stable_abi_string_applies_to_all_backends(tmp_path: Path) -> None:
    torch = load(tmp_path, GENERAL + TORCH + 'stable-abi = "2.11"\n').config.torch
    assert torch is not None
    assert {torch.stable_abi_for(b) for b in BACKENDS} == {Version((2, 11))}


def test_stable_abi_table_is_per_backend(tmp_path: Path) -> None:
    loaded = load(tmp_path, GENERAL + TORCH + '\n[torch.stable-abi]\ncuda = "2.11"\ncpu = "2.12"\n')
    torch = loaded.config.torch
    assert torch is not None
    assert torch.stable_abi_for("cuda") == Version((2, 11))
    assert torch.stable_abi_for("cpu") == Version((2, 12))
    assert torch.stable_abi_for("rocm") is None  # absent: the full ABI
    assert loaded.warnings == []


def test_stable_abi_for_a_backend_not_built_is_a_warning(tmp_path: Path) -> None:
    text = GENERAL.replace('"cpu", "cuda", "metal", "rocm", "xpu"', '"cuda"') + TORCH
    loaded = load(tmp_path, text + '\n[torch.stable-abi]\ncuda = "2.11"\nneuron = "2.11"\n')
    (warning,) = loaded.warnings
    assert (warning.severity, warning.key, warning.line) == (
        "warning",
        "torch.stable-abi.neuron",
        13,
    )
    assert "not in general.backends" in warning.message


def test_stable_abi_table_with_an_unknown_backend_is_an_error(tmp_path: Path) -> None:
    error = one_error(tmp_path, GENERAL + TORCH + 'stable-abi = { cuda = "2.11", gpu = "2.11" }\n')
    assert (error.key, error.line) == ("torch.stable-abi.gpu", 10)
    assert "unknown backend 'gpu'" in error.message


def test_v4_stable_abi_must_be_a_string(tmp_path: Path) -> None:
    error = one_error(tmp_path, V4.replace('stable-abi = "2.11"', 'stable-abi = { cuda = "2.11" }'))
    assert "edition-5 features" in error.message


# --------------------------------------------------------- [torch-noarch]


def test_empty_torch_noarch(tmp_path: Path) -> None:
    config = load(tmp_path, GENERAL + "\n[torch-noarch]\n").config
    assert config.framework == "torch-noarch"
    noarch = config.torch_noarch
    assert noarch is not None
    assert (noarch.pyext, noarch.cuda_capabilities, noarch.rocm_archs) == (None, None, None)


@pytest.mark.parametrize(
    ("cuda_key", "rocm_key"),
    [("cuda_capabilities", "rocm_archs"), ("cuda-capabilities", "rocm-archs")],
)
def test_torch_noarch_arch_keys_in_either_spelling(
    tmp_path: Path, cuda_key: str, rocm_key: str
) -> None:
    text = (
        GENERAL
        + '\n[torch-noarch]\npyext = ["py", "json"]\n'
        + f'{cuda_key} = ["9.0", "10.0"]\n{rocm_key} = ["gfx942"]\n'
    )
    noarch = load(tmp_path, text).config.torch_noarch
    assert noarch is not None
    assert noarch.pyext == ["py", "json"]
    assert noarch.cuda_capabilities == ["9.0", "10.0"]
    assert noarch.rocm_archs == ["gfx942"]


@pytest.mark.parametrize("kebab", ["cuda-capabilities", "rocm-archs"])
def test_torch_noarch_key_in_both_spellings_is_an_error(tmp_path: Path, kebab: str) -> None:
    snake = kebab.replace("-", "_")
    value = '["9.0"]' if kebab.startswith("cuda") else '["gfx942"]'
    text = GENERAL + f"\n[torch-noarch]\n{kebab} = {value}\n{snake} = {value}\n"
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == ("torch-noarch", 8)
    assert f"`{kebab}` and `{snake}`" in error.message


def test_torch_noarch_archs_are_checked(tmp_path: Path) -> None:
    text = (
        GENERAL + '\n[torch-noarch]\ncuda_capabilities = ["9.0", "sm_90"]\nrocm_archs = ["mi300"]\n'
    )
    found = errors(tmp_path, text)
    # Reported under the kebab-case key, at the line of the snake_case spelling.
    assert where(found) == [
        ("torch-noarch.cuda-capabilities[1]", 9),
        ("torch-noarch.rocm-archs[0]", 10),
    ]


def test_torch_noarch_has_no_src(tmp_path: Path) -> None:
    error = one_error(tmp_path, GENERAL + '\n[torch-noarch]\nsrc = ["a.py"]\n')
    assert error.key == "torch-noarch.src"
    assert "valid keys here: pyext, cuda-capabilities, rocm-archs" in (error.fix or "")


# --------------------------------------------------------------- [tvm-ffi]


def test_tvm_ffi(tmp_path: Path) -> None:
    text = GENERAL + toml(
        """
        [tvm-ffi]
        src = ["tvm-ffi-ext/binding.cpp"]
        include = ["include"]
        pyext = ["py"]
        cxx-flags = ["-O2"]
        """
    )
    config = load(tmp_path, text).config
    assert config.framework == "tvm-ffi"
    tvm = config.tvm_ffi
    assert tvm is not None
    assert (tvm.src, tvm.include, tvm.pyext, tvm.cxx_flags) == (
        ["tvm-ffi-ext/binding.cpp"],
        ["include"],
        ["py"],
        ["-O2"],
    )


def test_tvm_ffi_needs_src_and_has_no_torch_keys(tmp_path: Path) -> None:
    found = errors(tmp_path, GENERAL + '\n[tvm-ffi]\nstable-abi = "2.11"\n')
    assert where(found) == [("tvm-ffi.src", 8), ("tvm-ffi.stable-abi", 9)]


# --------------------------------------------------------- framework rules


def test_no_framework_section(tmp_path: Path) -> None:
    error = one_error(tmp_path, GENERAL)
    assert (error.key, error.line) == (None, None)
    assert "[torch]" in error.message and "[torch-noarch]" in error.message
    assert "[tvm-ffi]" in error.message


@pytest.mark.parametrize("second", ["torch-noarch", "tvm-ffi"])
def test_two_framework_sections(tmp_path: Path, second: str) -> None:
    text = (
        GENERAL + TORCH + f"\n[{second}]\n" + ('src = ["b.cpp"]\n' if second == "tvm-ffi" else "")
    )
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == (second, 11)
    assert f"[{second}] conflicts with [torch]" in error.message


def test_framework_section_in_snake_case_is_unknown(tmp_path: Path) -> None:
    # `[tvm_ffi]` must not count as a second framework that slips past the check.
    error = one_error(tmp_path, GENERAL + TORCH + '\n[tvm_ffi]\nsrc = ["b.cpp"]\n')
    assert (error.key, error.line) == ("tvm_ffi", 11)
    assert (error.fix or "").startswith("did you mean `tvm-ffi`?")


# ------------------------------------------------------------ [kernel.X]

KERNELS = toml(
    """
    [kernel.relu_cuda]
    backend = "cuda"
    depends = ["torch", "cutlass_3_9"]
    src = ["relu_cuda/relu.cu"]
    include = ["relu_cuda"]
    cxx-flags = ["-DX"]
    cuda-capabilities = ["8.0", "9.0a", "10.0f", "9.0+PTX"]
    cuda-flags = ["--use_fast_math"]
    cuda-minver = "12.8"

    [kernel.relu_rocm]
    backend = "rocm"
    depends = ["torch"]
    src = ["relu_cuda/relu.cu"]
    rocm-archs = ["gfx90a", "gfx942"]
    hip-flags = ["-ffast-math"]

    [kernel.relu_xpu]
    backend = "xpu"
    depends = ["sycl_tla"]
    src = ["relu_xpu/relu.cpp"]
    sycl-flags = ["-fsycl"]

    [kernel.relu_metal]
    backend = "metal"
    depends = ["metal-cpp"]
    src = ["relu_metal/relu.metal"]
    include = ["metal"]

    [kernel.relu_cpu]
    backend = "cpu"
    depends = []
    src = ["relu_cpu/relu.cpp"]
    cxx-flags = ["-march=native"]
    """
)


def test_kernel_options_per_backend(tmp_path: Path) -> None:
    config = load(tmp_path, GENERAL + TORCH + "\n" + KERNELS).config
    cuda = config.kernel["relu_cuda"]
    assert isinstance(cuda, CudaKernel)
    assert cuda.depends == ["torch", "cutlass_3_9"]
    assert cuda.src == ["relu_cuda/relu.cu"]
    assert cuda.include == ["relu_cuda"]
    assert cuda.cxx_flags == ["-DX"]
    assert cuda.cuda_capabilities == ["8.0", "9.0a", "10.0f", "9.0+PTX"]
    assert cuda.cuda_flags == ["--use_fast_math"]
    assert cuda.cuda_minver == Version((12, 8))
    rocm = config.kernel["relu_rocm"]
    assert isinstance(rocm, RocmKernel)
    assert (rocm.rocm_archs, rocm.hip_flags) == (["gfx90a", "gfx942"], ["-ffast-math"])
    xpu = config.kernel["relu_xpu"]
    assert isinstance(xpu, XpuKernel) and xpu.sycl_flags == ["-fsycl"]
    metal = config.kernel["relu_metal"]
    assert isinstance(metal, MetalKernel) and metal.include == ["metal"]
    cpu = config.kernel["relu_cpu"]
    assert isinstance(cpu, CpuKernel) and cpu.depends == [] and cpu.cxx_flags == ["-march=native"]
    assert list(config.kernels_for("cuda")) == ["relu_cuda"]
    assert list(config.kernels_for("neuron")) == []


def test_kernel_defaults(tmp_path: Path) -> None:
    text = GENERAL + TORCH + '\n[kernel.k]\nbackend = "cuda"\ndepends = []\nsrc = []\n'
    kernel = load(tmp_path, text).config.kernel["k"]
    assert isinstance(kernel, CudaKernel)
    assert (kernel.cuda_capabilities, kernel.cuda_flags, kernel.cuda_minver) == (None, [], None)
    assert (kernel.include, kernel.cxx_flags) == ([], [])


@pytest.mark.parametrize("dependency", DEPENDENCIES)
def test_every_dependency_name(tmp_path: Path, dependency: str) -> None:
    text = (
        GENERAL + TORCH + f'\n[kernel.k]\nbackend = "cpu"\ndepends = ["{dependency}"]\nsrc = []\n'
    )
    assert load(tmp_path, text).config.kernel["k"].depends == [dependency]


def test_unknown_dependency_suggests_the_closest(tmp_path: Path) -> None:
    text = GENERAL + TORCH + '\n[kernel.k]\nbackend = "cpu"\ndepends = ["torch", "cutlas_3_6"]\n'
    error = one_error(tmp_path, text + "src = []\n")
    assert (error.key, error.line) == ("kernel.k.depends[1]", 13)
    assert "unknown dependency 'cutlas_3_6'" in error.message
    assert error.fix == "did you mean 'cutlass_3_6'?"


@pytest.mark.parametrize(
    ("option", "value", "owner"),
    [
        ("cuda-capabilities", '["9.0"]', "cuda"),
        ("cuda-flags", '["-O3"]', "cuda"),
        ("cuda-minver", '"12.8"', "cuda"),
        ("rocm-archs", '["gfx942"]', "rocm"),
        ("hip-flags", '["-O3"]', "rocm"),
        ("sycl-flags", '["-O3"]', "xpu"),
    ],
)
@pytest.mark.parametrize("backend", ["cpu", "cuda", "metal", "rocm", "xpu"])
def test_backend_options_only_on_their_backend(
    tmp_path: Path, option: str, value: str, owner: str, backend: str
) -> None:
    text = GENERAL + TORCH + f'\n[kernel.k]\nbackend = "{backend}"\ndepends = []\nsrc = []\n'
    text += f"{option} = {value}\n"
    if backend == owner:
        load(tmp_path, text)
        return
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == (f"kernel.k.{option}", 15)
    assert f"`{option}` applies only to {owner} kernels" in error.message


@pytest.mark.parametrize("key", ["backend", "src", "depends"])
def test_required_kernel_keys(tmp_path: Path, key: str) -> None:
    body = {"backend": 'backend = "cpu"', "src": "src = []", "depends": "depends = []"}
    text = (
        GENERAL
        + TORCH
        + "\n[kernel.k]\n"
        + "".join(line + "\n" for name, line in body.items() if name != key)
    )
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == (f"kernel.k.{key}", 11)
    expected = "no `backend` key" if key == "backend" else f"required key `{key}` is missing"
    assert expected in error.message


@pytest.mark.parametrize("backend", ["neuron", "tpu", "cann", "CUDA"])
def test_kernel_backend_must_be_buildable(tmp_path: Path, backend: str) -> None:
    text = GENERAL + TORCH + f'\n[kernel.k]\nbackend = "{backend}"\ndepends = []\nsrc = []\n'
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == ("kernel.k.backend", 12)
    assert "expected one of: cpu, cuda, metal, rocm, xpu" in error.message


def test_kernel_for_a_backend_not_built_is_a_warning(tmp_path: Path) -> None:
    text = GENERAL.replace('"cpu", "cuda", "metal", "rocm", "xpu"', '"cpu"') + TORCH
    loaded = load(tmp_path, text + '\n[kernel.k]\nbackend = "metal"\ndepends = []\nsrc = []\n')
    (warning,) = loaded.warnings
    assert (warning.severity, warning.key, warning.line) == ("warning", "kernel.k.backend", 12)
    assert "'metal'" in warning.message


def test_kernel_names_are_any_string(tmp_path: Path) -> None:
    text = GENERAL + TORCH + '\n[kernel."Relu.Op 1"]\nbackend = "cpu"\ndepends = []\nsrc = []\n'
    assert list(load(tmp_path, text).config.kernel) == ["Relu.Op 1"]


def test_nul_characters_are_refused_where_they_are(tmp_path: Path) -> None:
    text = (
        GENERAL
        + TORCH.replace("[torch]", '[torch]\ncxx-flags = ["-O3", "-DX=\\u0000"]')
        + '\n[kernel."k\\u0000"]\nbackend = "cpu"\ndepends = []\nsrc = []\n'
    )
    with pytest.raises(UserError) as info:
        load(tmp_path, text)
    found = [(d.key, d.line) for d in info.value.diagnostics]
    lines = text.splitlines()
    flags_line = next(i for i, line in enumerate(lines, 1) if line.startswith("cxx-flags"))
    assert found[0] == ("torch.cxx-flags[1]", flags_line)
    assert found[1][0] == 'kernel."k\\u0000"'
    assert all("NUL character" in d.message for d in info.value.diagnostics)


@pytest.mark.parametrize("capability", ["8.0", "9.0a", "10.0f", "9.0+PTX", "12.0a+PTX"])
def test_capability_forms_load(tmp_path: Path, capability: str) -> None:
    text = GENERAL + TORCH + '\n[kernel.k]\nbackend = "cuda"\ndepends = []\nsrc = []\n'
    kernel = load(tmp_path, text + f'cuda-capabilities = ["{capability}"]\n').config.kernel["k"]
    assert isinstance(kernel, CudaKernel) and kernel.cuda_capabilities == [capability]


# ---------------------------------------------------------- float versions


def test_float_version_fix_quotes_the_source_text(tmp_path: Path) -> None:
    text = GENERAL + "\n[general.cuda]\nminver = 12.10\nmaxver = 13.0\n" + TORCH
    found = errors(tmp_path, text + "minver = 2.9\n")
    assert where(found) == [
        ("general.cuda.minver", 9),
        ("general.cuda.maxver", 10),
        ("torch.minver", 14),
    ]
    # 12.10 parses as the float 12.1; the fix shows what the author wrote.
    assert "got the number 12.1" in found[0].message
    assert found[0].fix == 'quote it: minver = "12.10"'
    assert found[1].fix == 'quote it: maxver = "13.0"'
    assert found[2].fix == 'quote it: minver = "2.9"'


def test_float_in_an_inline_table_and_in_a_kernel(tmp_path: Path) -> None:
    text = GENERAL + "\n[torch]\nstable-abi = { cuda = 2.10 }\n"
    text += '\n[kernel.k]\nbackend = "cuda"\ndepends = []\nsrc = []\ncuda-minver = 12.8\n'
    found = errors(tmp_path, text)
    assert where(found) == [("torch.stable-abi.cuda", 9), ("kernel.k.cuda-minver", 15)]
    assert found[0].fix == 'quote it: cuda = "2.10"'
    assert found[1].fix == 'quote it: cuda-minver = "12.8"'


def test_float_array_elements(tmp_path: Path) -> None:
    text = GENERAL + TORCH + '\n[kernel.k]\nbackend = "cuda"\ndepends = []\nsrc = []\n'
    found = errors(tmp_path, text + "cuda-capabilities = [\n  8.0,\n  9.0,\n]\n")
    assert where(found) == [
        ("kernel.k.cuda-capabilities[0]", 16),
        ("kernel.k.cuda-capabilities[1]", 17),
    ]
    assert found[0].fix == 'quote each element: "8.0"'


def test_float_stable_abi_string(tmp_path: Path) -> None:
    error = one_error(tmp_path, GENERAL + "\n[torch]\nstable-abi = 2.10\n")
    assert (error.key, error.line) == ("torch.stable-abi", 9)
    assert error.fix == 'quote it: stable-abi = "2.10"'


def test_float_where_an_integer_belongs_is_not_told_to_quote(tmp_path: Path) -> None:
    error = one_error(tmp_path, GENERAL.replace("version = 1", "version = 1.0") + TORCH)
    assert (error.key, error.line) == ("general.version", 3)
    assert error.fix == "write a whole number without a decimal point: version = 1"


@pytest.mark.parametrize(
    ("table", "key"),
    [
        ("general.cuda", "minver"),
        ("general.cuda", "maxver"),
        ("torch", "minver"),
        ("torch", "maxver"),
        ("torch", "stable-abi"),
    ],
)
@pytest.mark.parametrize("value", ["12", "12.8.1"])
def test_versions_are_major_minor(tmp_path: Path, table: str, key: str, value: str) -> None:
    body = f'\n[{table}]\n{key} = "{value}"\n'
    text = GENERAL + body + ("" if table == "torch" else TORCH)
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == (f"{table}.{key}", 9)
    assert f"invalid version '{value}': expected major.minor" in error.message
    assert error.message.endswith('write "12.0"' if value == "12" else 'write "12.8"')


# ------------------------------------------------------------ unknown keys


UNKNOWN_KEYS = [
    (GENERAL + TORCH + "\n[torchh]\n", "torchh", 11, "torch", "general, torch, torch-noarch"),
    (GENERAL + 'licence = "MIT"\n' + TORCH, "general.licence", 7, "license", "name, version"),
    (GENERAL + "\n[torch]\nsrcs = []\n", "torch.srcs", 9, "src", "src, include, minver"),
    (
        GENERAL + '\n[general.cuda]\nmin-ver = "12.6"\n' + TORCH,
        "general.cuda.min-ver",
        9,
        "minver",
        "minver, maxver",
    ),
    (
        GENERAL + '\n[general.hub]\nrepo_id = "a/b"\n' + TORCH,
        "general.hub.repo_id",
        9,
        "repo-id",
        "repo-id, branch",
    ),
    (
        GENERAL + TORCH + '\n[kernel.k]\nbackend = "cuda"\ndepends = []\nsrc = []\n'
        'cuda-capability = ["9.0"]\n',
        "kernel.k.cuda-capability",
        15,
        "cuda-capabilities",
        "src, depends, include, cxx-flags, cuda-capabilities, cuda-flags, cuda-minver",
    ),
    (
        GENERAL + TORCH + '\n[kernel.k]\nbackend = "cpu"\ndepends = []\nsrc = []\n'
        'cxx_flags = ["-O3"]\n',
        "kernel.k.cxx_flags",
        15,
        "cxx-flags",
        "src, depends, include, cxx-flags",
    ),
    (
        GENERAL + "python_depends = []\n" + TORCH,
        "general.python_depends",
        7,
        "python-depends",
        "",
    ),
    (
        GENERAL + "\n[tvm-ffi]\nsrc = []\ncxxflags = []\n",
        "tvm-ffi.cxxflags",
        10,
        "cxx-flags",
        "",
    ),
]


@pytest.mark.parametrize(
    ("text", "key", "line", "suggestion", "valid"),
    UNKNOWN_KEYS,
    ids=[case[1] for case in UNKNOWN_KEYS],
)
def test_unknown_keys_list_valid_keys_and_suggest_the_closest(
    tmp_path: Path, text: str, key: str, line: int, suggestion: str, valid: str
) -> None:
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == (key, line)
    assert f"unknown key `{key.rsplit('.', 1)[-1]}`" in error.message
    assert (error.fix or "").startswith(f"did you mean `{suggestion}`? valid keys here: ")
    assert valid in (error.fix or "")


def test_all_errors_are_reported_at_once(tmp_path: Path) -> None:
    text = toml(
        """
        [general]
        name = "Relu"
        version = 1
        edition = 5
        license = "Apache-2.0"
        backends = ["cuda", "gpu"]
        bogus = 1

        [torch]
        src = "a.cpp"

        [kernel.a]
        backend = "cuda"
        src = []
        cuda-capabilities = ["sm_80"]

        [kernel.b]
        backend = "rocm"
        depends = ["cutlass"]
        src = []
        rocm-archs = ["mi300"]
        """
    )
    found = errors(tmp_path, text)
    assert where(found) == [
        ("general.name", 2),
        ("general.backends[1]", 6),
        ("general.bogus", 7),
        ("torch.src", 10),
        ("kernel.a.depends", 12),
        ("kernel.a.cuda-capabilities[0]", 15),
        ("kernel.b.depends[0]", 19),
        ("kernel.b.rocm-archs[0]", 21),
    ]


# ---------------------------------------------------------- line numbers


def test_lines_of_dotted_keys_and_inline_tables(tmp_path: Path) -> None:
    text = toml(
        """
        general.name = "relu"
        general.version = 1
        general.edition = 5
        general.license = "MIT"
        general.backends = ["cuda"]
        general.hub = { repo-id = "a/b", brnch = "x" }
        torch = { src = ["a.cpp"], stable-abi = { cuda = "2" } }
        kernel.k = { backend = "cuda", depends = [], src = [1] }
        """
    )
    found = errors(tmp_path, text)
    assert where(found) == [
        ("general.hub.brnch", 6),
        ("torch.stable-abi.cuda", 7),
        ("kernel.k.src[0]", 8),
    ]


def test_lines_of_arrays_of_tables_and_multiline_arrays(tmp_path: Path) -> None:
    text = GENERAL + toml(
        """
        src-of-nothing = 1
        [[general.kernel-depends]]
        repo-id = "a/b"

        [[general.kernel-depends]]
        repo-id = "a/c"
        version = "x"

        [torch]
        src = [
            "a.cpp",  # a comment with [brackets], "quotes" and = signs
            "b.cpp",
            3,
        ]
        """
    )
    found = errors(tmp_path, text)
    assert where(found) == [
        ("general.src-of-nothing", 7),
        ("general.kernel-depends[0]", 8),
        ("general.kernel-depends[1].version", 13),
        ("torch.src[2]", 19),
    ]


def test_lines_of_quoted_keys_and_crlf(tmp_path: Path) -> None:
    text = (GENERAL + TORCH + '\n[kernel."a.b"]\nbackend = "cpu"\ndepends = []\nsrc = 1\n').replace(
        "\n", "\r\n"
    )
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == ('kernel."a.b".src', 14)


def test_line_breaks_of_unicode_inside_keys_and_strings_do_not_shift_lines(
    tmp_path: Path,
) -> None:
    # TOML ends a line only at LF; U+0085 and U+2028 are characters of a key or
    # a string (Python's splitlines breaks at both).
    kernel = '\n[kernel."\u0085"]\nbackend = "cpu"\n# \u2028 \u0085\ndepends = []\nsrc = 1\n'
    text = GENERAL + TORCH + kernel
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == ('kernel."\\u0085".src', 15)


# ----------------------------------------------------------- reading files


def test_missing_build_toml(tmp_path: Path) -> None:
    with pytest.raises(UserError) as info:
        load_config(tmp_path / "nowhere")
    (error,) = info.value.diagnostics
    assert error.message.startswith("no build.toml in ")
    assert (error.file or "").endswith("nowhere/build.toml")


def test_build_toml_that_is_a_directory(tmp_path: Path) -> None:
    (tmp_path / "build.toml").mkdir()
    with pytest.raises(UserError) as info:
        load_config(tmp_path)
    assert "cannot read build.toml" in info.value.diagnostics[0].message


def test_a_path_to_the_file_itself(tmp_path: Path) -> None:
    write(tmp_path, GENERAL + TORCH)
    assert load_config(tmp_path / "build.toml").config.general.name == "relu"


def test_empty_file(tmp_path: Path) -> None:
    error = one_error(tmp_path, "")
    assert (error.key, error.line) == ("general", None)
    assert "[general] table is missing" in error.message


def test_general_of_the_wrong_type(tmp_path: Path) -> None:
    error = one_error(tmp_path, "general = [1]\n")
    assert (error.key, error.line) == ("general", 1)
    assert error.message == "`general` must be a table, not an array"


def test_a_byte_order_mark_is_allowed(tmp_path: Path) -> None:
    config = load(tmp_path, b"\xef\xbb\xbf" + (GENERAL + TORCH).encode()).config
    assert config.general.name == "relu"


def test_non_utf8_text(tmp_path: Path) -> None:
    error = one_error(tmp_path, b'[general]\nname = "r\xe9lu"\n')
    assert (error.key, error.line) == (None, 2)
    assert "not UTF-8" in error.message and "0xe9" in error.message


@pytest.mark.parametrize(
    ("text", "line"),
    [
        ("[general\n", 1),
        ("[general]\nname = relu\n", 2),
        ('[general]\nname = "relu\n', 2),
        ('[general]\nname = "a"\nname = "b"\n', 3),
        ('[general]\nbackends = [\n  "cuda"\n  "cpu"\n]\n', 4),
        ("[a]\n[a]\n", 2),
        ("[general]\nname =\n", 2),
        ("x = { a = 1,\n}\n", 1),
    ],
)
def test_toml_syntax_errors_have_a_line(tmp_path: Path, text: str, line: int) -> None:
    error = one_error(tmp_path, text)
    assert (error.key, error.line) == (None, line)
    assert error.message.startswith("TOML syntax error, column ")


# ------------------------------------------------------------ normalizing


def test_to_json_uses_build_toml_key_names_and_major_minor(tmp_path: Path) -> None:
    text = GENERAL + '\n[general.cuda]\nminver = "12.0"\nmaxver = "13.08"\n'
    text += '\n[torch]\nstable-abi = { cuda = "2.10", cpu = "3.0" }\n'
    data = load(tmp_path, text).config.to_json()
    general = data["general"]
    assert isinstance(general, dict)
    assert general["cuda"] == {
        "python-depends": [],
        "kernel-depends": [],
        "minver": "12.0",
        "maxver": "13.8",
    }
    torch = data["torch"]
    assert isinstance(torch, dict)
    assert torch["stable-abi"] == {"cuda": "2.10", "cpu": "3.0"}


@pytest.mark.parametrize(("example", "built"), [("relu", ["5"]), ("relu-legacy", ["5", "v4"])])
def test_a_file_builds_the_validators_of_its_edition_only(example: str, built: list[str]) -> None:
    """pydantic builds a model's validator on first use: loading an edition-5 file
    never builds those of the pre-edition shapes (a fresh process, as a user runs it)."""
    script = (
        "import sys\n"
        "from pathlib import Path\n"
        "from kernelnix.config import load_config\n"
        "from kernelnix.config.editions.probe import MODELS\n"
        "load_config(Path(sys.argv[1]))\n"
        "print(' '.join(sorted(s for s, m in MODELS.items() if m.__pydantic_complete__)))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(EXAMPLES / example)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    assert done.stdout.split() == built
