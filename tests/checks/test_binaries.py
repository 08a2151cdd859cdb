"""Binary rules on a corpus of real libraries compiled with gcc, g++ and nvcc.

Each corpus case plants one violation (or none); each rule must catch its
plant and stay silent on the clean cases. Where kernel-abi-check covers the
same ground (manylinux_2_28 symbol versions, Python ABI 3.9), the verdicts
must agree, violation for violation.
"""

from __future__ import annotations

import pytest
from checks_corpus.corpus import CASES, Corpus, build_corpus

from kernelnix.checks.binaries import (
    Binary,
    BinarySettings,
    check_binary,
    cxx_runtime,
    load_binaries,
    needed_libraries,
    symbol_versions,
)
from kernelnix.checks.demangle import outer_names
from kernelnix.checks.elf import ElfError, read_elf
from kernelnix.checks.policy import load_policy
from kernelnix.checks.report import Violation
from kernelnix.core.version import Version

pytestmark = pytest.mark.slow

ALL_CASES = [case.name for case in CASES] + ["glibc_234_stripped"]
CLEAN_FOR_MANYLINUX = {"clean_c", "clean_static_cxx", "dynamic_cxx", "cuda_kernel"}


@pytest.fixture(scope="session")
def corpus() -> Corpus:
    return build_corpus()


def _library(corpus: Corpus, name: str) -> Binary:
    if name not in corpus.libraries:
        pytest.skip(f"{name}: compiler not available")
    path = corpus.path(name)
    binaries, problems = load_binaries(path.parent, path.name)
    assert not problems
    assert len(binaries) == 1
    return binaries[0]


def _settings(
    policy: str = "manylinux_2_28",
    *,
    python_abi: str = "3.9",
    stable_abi: str | None = None,
    backend: str | None = "cuda",
    redistributable: bool = True,
) -> BinarySettings:
    return BinarySettings(
        policy=load_policy(policy, "x86_64"),
        python_abi=Version.parse(python_abi),
        stable_abi=Version.parse(stable_abi) if stable_abi else None,
        macos_min=Version.parse("15.0"),
        backend=backend,
        cpu="x86_64",
        os_name="linux",
        redistributable=redistributable,
    )


def _found(violations: list[Violation]) -> set[tuple[str, str]]:
    return {(v.rule, v.subject) for v in violations}


# ---------------------------------------------------------------------------
# The ELF reader


def test_reader_sees_versions_needed_and_runpath(corpus: Corpus) -> None:
    info = read_elf(corpus.path("glibc_234"))
    assert info.undefined["pthread_create"] == "GLIBC_2.34"
    assert info.version_libraries["GLIBC_2.34"] == "libc.so.6"
    assert info.needed == ["libc.so.6"]
    assert read_elf(corpus.path("runpath_abs")).runpath == ["/nix/store/abc123-foo/lib"]
    assert read_elf(corpus.path("needs_tiny")).needed == ["libkntiny.so"]


def test_reader_uses_dynsym_of_a_stripped_library(corpus: Corpus) -> None:
    info = read_elf(corpus.path("glibc_234_stripped"))
    assert not info.has_symtab
    assert info.has_dynsym
    assert info.undefined["pthread_create"] == "GLIBC_2.34"


def test_reader_rejects_non_elf_and_truncated_files(tmp_path, corpus: Corpus) -> None:
    (tmp_path / "text.so").write_bytes(b"not an ELF file at all" * 4)
    with pytest.raises(ElfError):
        read_elf(tmp_path / "text.so")
    truncated = tmp_path / "truncated.so"
    truncated.write_bytes(corpus.path("clean_c").read_bytes()[:200])
    with pytest.raises(ElfError):
        read_elf(truncated)


def test_damaged_library_is_a_violation_not_a_crash(tmp_path) -> None:
    (tmp_path / "junk.so").write_bytes(b"\x7fELF" + b"\xff" * 60)
    binaries, problems = load_binaries(tmp_path, "junk.so")
    assert binaries == []
    assert [p.rule for p in problems] == ["binary-format"]


# ---------------------------------------------------------------------------
# Each rule catches its plant


@pytest.mark.parametrize("name", sorted(CLEAN_FOR_MANYLINUX))
def test_clean_libraries_have_no_violations_under_manylinux_2_28(corpus, name) -> None:
    assert check_binary(_library(corpus, name), _settings()) == []


@pytest.mark.parametrize("name", ["clean_c", "clean_static_cxx"])
def test_clean_libraries_pass_the_kernel_policy(corpus, name) -> None:
    assert check_binary(_library(corpus, name), _settings("kernel")) == []


def test_glibc_2_34_symbol(corpus: Corpus) -> None:
    for policy in ("kernel", "manylinux_2_28"):
        violations = check_binary(_library(corpus, "glibc_234"), _settings(policy))
        assert ("symbol-version", "pthread_create@GLIBC_2.34") in _found(violations)
        assert {v.rule for v in violations} == {"symbol-version"}
    assert check_binary(_library(corpus, "glibc_234"), _settings("manylinux_2_34")) == []


def test_glibcxx_3_4_29_symbol(corpus: Corpus) -> None:
    violations = check_binary(_library(corpus, "glibcxx_329"), _settings())
    assert _found(violations) == {("symbol-version", "_ZSt8to_charsPcS_d@GLIBCXX_3.4.29")}
    message = violations[0]
    assert message.found == "requires GLIBCXX 3.4.29"
    assert message.limit == "policy manylinux_2_28: GLIBCXX <= 3.4.24"
    assert check_binary(_library(corpus, "glibcxx_329"), _settings("manylinux_2_34")) == []


def test_dynamic_libstdcxx_is_forbidden_by_the_kernel_policy(corpus: Corpus) -> None:
    for name in ("dynamic_cxx", "glibcxx_329", "cuda_kernel"):
        violations = check_binary(_library(corpus, name), _settings("kernel"))
        assert ("needed-library", "libstdc++.so.6") in _found(violations), name
    fix = next(v.fix for v in check_binary(_library(corpus, "dynamic_cxx"), _settings("kernel")))
    assert "-static-libstdc++" in fix


def _cxx_runtime(corpus: Corpus, name: str) -> set[tuple[str, str]]:
    return _found(list(cxx_runtime(_library(corpus, name), _settings("kernel"))))


def test_exported_cxx_runtime_and_private_unwinder_are_refused(corpus: Corpus) -> None:
    """-static-libstdc++ -static-libgcc: libstdc++ exported, libgcc_eh's unwinder inside."""
    assert _cxx_runtime(corpus, "streams_exported_cxx") == {
        ("cxx-runtime", "__cxa_throw, __gxx_personality_v0, _ZNSt6locale7classicEv"),
        ("cxx-runtime", "_dl_find_object"),
    }
    violations = list(cxx_runtime(_library(corpus, "streams_exported_cxx"), _settings("kernel")))
    assert all("-static-libgcc" in v.fix or "--exclude-libs" in v.fix for v in violations)


@pytest.mark.parametrize(
    "name", ["streams_static_cxx", "clean_static_cxx", "dynamic_cxx", "clean_c", "cuda_kernel"]
)
def test_private_or_shared_cxx_runtime_passes(corpus: Corpus, name: str) -> None:
    assert _cxx_runtime(corpus, name) == set()


def test_unexpected_needed_library(corpus: Corpus) -> None:
    for policy in ("kernel", "manylinux_2_28"):
        violations = check_binary(_library(corpus, "needs_tiny"), _settings(policy))
        assert _found(violations) == {("needed-library", "libkntiny.so")}


def test_backend_runtime_libraries_are_allowed_only_for_their_backend(corpus) -> None:
    cuda = _library(corpus, "cuda_kernel")
    assert check_binary(cuda, _settings(backend="cuda")) == []
    violations = check_binary(cuda, _settings(backend="rocm"))
    assert _found(violations) == {("needed-library", "libcudart.so.13")}


def test_absolute_runpath_in_redistributable_builds_only(corpus: Corpus) -> None:
    library = _library(corpus, "runpath_abs")
    violations = check_binary(library, _settings())
    assert _found(violations) == {("search-path", "RUNPATH /nix/store/abc123-foo/lib")}
    assert "absolute path" in violations[0].found
    assert check_binary(library, _settings(redistributable=False)) == []


def test_glibc_private_is_reported_clearly(corpus: Corpus) -> None:
    violations = check_binary(_library(corpus, "glibc_private"), _settings("kernel"))
    assert _found(violations) == {("symbol-version", "_rtld_global@GLIBC_PRIVATE")}
    assert "internal to glibc" in violations[0].found
    # The dynamic loader itself is an allowed dependency.
    assert "ld-linux-x86-64.so.2" in _library(corpus, "glibc_private").needed


def test_python_symbols_outside_the_stable_abi(corpus: Corpus) -> None:
    violations = check_binary(_library(corpus, "py_nonabi3"), _settings())
    assert _found(violations) == {("python-abi", "_PyObject_GetDictPtr")}
    assert "not part of the Python stable ABI" in violations[0].found


def test_python_symbol_newer_than_the_target(corpus: Corpus) -> None:
    library = _library(corpus, "py_incompatible")
    violations = check_binary(library, _settings())
    assert _found(violations) == {("python-abi", "PyType_GetName")}
    assert violations[0].found == "added to the stable ABI in Python 3.11"
    assert check_binary(library, _settings(python_abi="3.11")) == []


def test_libtorch_cxx_symbols_in_a_stable_abi_build(corpus: Corpus) -> None:
    library = _library(corpus, "torch_unstable")
    assert check_binary(library, _settings()) == []  # not a stable-ABI build
    violations = check_binary(library, _settings(stable_abi="2.10"))
    assert _found(violations) == {
        ("torch-stable-abi", "at::manual_seed(unsigned long)"),
        ("torch-stable-abi", "torch::jit::setGraphExecutorOptimize(bool)"),
        # Demangles with the return type first: a prefix test would miss it.
        ("torch-stable-abi", "int c10::checked_convert<int>(double)"),
    }


def test_shim_functions_newer_than_the_stable_abi_target(corpus: Corpus) -> None:
    library = _library(corpus, "torch_shim")
    violations = check_binary(library, _settings(stable_abi="2.10"))
    assert {(v.subject, v.found) for v in violations} == {
        ("torch_exception_get_what", "shim function added in torch 2.13"),
        ("torch_has_storage", "shim function added in torch 2.14"),
    }
    (newer,) = check_binary(library, _settings(stable_abi="2.13"))
    assert newer.subject == "torch_has_storage"
    assert check_binary(library, _settings(stable_abi="2.14")) == []


def test_check_binary_runs_only_the_rules_it_is_given(corpus: Corpus) -> None:
    library = _library(corpus, "needs_tiny")
    assert check_binary(library, _settings(), (symbol_versions,)) == []
    violations = check_binary(library, _settings(), (needed_libraries,))
    assert _found(violations) == {("needed-library", "libkntiny.so")}


def test_wrong_cpu_for_the_variant(corpus: Corpus) -> None:
    settings = _settings()
    settings = BinarySettings(**{**settings.__dict__, "cpu": "aarch64"})
    violations = check_binary(_library(corpus, "clean_c"), settings)
    assert _found(violations) == {("binary-platform", "architecture")}


# ---------------------------------------------------------------------------
# Agreement with the reference checker (kernel-abi-check, PyPI)


def _reference_verdict(path) -> set[tuple[str, ...]] | str:
    abi = pytest.importorskip("kernel_abi_check")
    library = abi.ObjectFile(str(path))
    try:
        manylinux = library.check_manylinux("manylinux_2_28")
    except ValueError as exc:  # non-numeric versions make the whole file an error
        return f"error: {exc}"
    found: set[tuple[str, ...]] = {("symbol-version", v.name, v.dep, v.version) for v in manylinux}
    for violation in library.check_python_abi("3.9"):
        added = getattr(violation, "version_added", None)
        found.add(("python-abi", violation.name, *([added] if added else [])))
    return found


def _our_verdict(binary: Binary) -> set[tuple[str, ...]]:
    found: set[tuple[str, ...]] = set()
    for violation in check_binary(binary, _settings()):
        if violation.rule == "symbol-version":
            name, _, version = violation.subject.partition("@")
            namespace, _, number = version.partition("_")
            found.add(("symbol-version", name, namespace, number))
        elif violation.rule == "python-abi":
            added = violation.found.removeprefix("added to the stable ABI in Python ")
            found.add(
                ("python-abi", violation.subject, *([added] if added != violation.found else []))
            )
    return found


@pytest.mark.parametrize("name", [n for n in ALL_CASES if n != "glibc_234_stripped"])
def test_verdicts_agree_with_kernel_abi_check(corpus: Corpus, name: str) -> None:
    binary = _library(corpus, name)
    reference = _reference_verdict(corpus.path(name))
    ours = _our_verdict(binary)
    if isinstance(reference, str):
        # The reference gives up on the file; we fail it with a readable violation.
        assert ours and all(v[0] == "symbol-version" and not v[3][0].isdigit() for v in ours)
    else:
        assert ours == reference


def test_stripped_library_is_caught_by_us_and_missed_by_the_reference(corpus) -> None:
    path = corpus.path("glibc_234_stripped")
    assert _reference_verdict(path) == set()  # the reference reads only .symtab
    assert ("symbol-version", "pthread_create", "GLIBC", "2.34") in _our_verdict(
        _library(corpus, "glibc_234_stripped")
    )


@pytest.mark.parametrize(
    ("mangled", "outer"),
    [
        ("_ZN2at6native3addEv", ["at", "native"]),
        ("_ZNK3c1010TensorImpl4sizeEv", ["c10", "TensorImpl"]),
        ("_ZTIN2at6TensorE", ["at", "Tensor"]),  # typeinfo for at::Tensor
        ("_ZN5torch6stable6detail4callEv", ["torch", "stable"]),
        ("_ZNSt6vectorIiSaIiEE9push_backERKi", []),  # std::
        ("_Z2atv", []),  # a global function named `at`, not a namespace
        ("PyType_GetName", []),
    ],
)
def test_outer_names_of_mangled_symbols(mangled: str, outer: list[str]) -> None:
    assert outer_names(mangled) == outer
