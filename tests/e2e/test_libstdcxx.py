"""The C++ runtime question, answered on this machine (docs/libstdcxx.md).

kernel-builder moved from a statically linked libstdc++ to the shared one
because a kernel's static copy and Torch's shared libstdc++ keep separate
global state. tests/data/libstdcxx/probe.cpp is a Torch op library that uses
std::regex, locales, std::cout, exceptions in both directions across the
library boundary and std::string to and from Torch. It is compiled once and
linked five ways; each library is loaded into a fresh Python process with
Torch by probe_run.py. Every assertion is what that shows with this machine's
g++ and the torch CPU wheel: a change in behaviour fails the test.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from binary_settings import kernel_policy
from paths import TESTS

from kernelnix.checks.binaries import (
    BinaryRule,
    cxx_runtime,
    load_binaries,
    needed_libraries,
    symbol_versions,
)
from kernelnix.checks.elf import read_elf
from kernelnix.core.version import Version

pytestmark = pytest.mark.slow

DATA = TESTS / "data" / "libstdcxx"
STATIC = ("-static-libstdc++",)
STATIC_LIBGCC = ("-static-libgcc",)
HIDDEN = ("-Wl,--exclude-libs,ALL",)
# After the objects: libgcc's helpers from the archive, the unwinder (which
# libgcc.a lacks) still from libgcc_s.so.1.
LIBGCC_HELPERS = ("-l:libgcc.a",)
LINKS = {
    "dynamic": (),
    # The hermetic toolchain's LDFLAGS before this experiment.
    "static": STATIC + STATIC_LIBGCC,
    "static-hidden": STATIC + STATIC_LIBGCC + HIDDEN,
    "static-shared-libgcc": STATIC,
    # The link docs/libstdcxx.md recommends, which redistributable builds use.
    "static-hidden-shared-unwinder": STATIC + HIDDEN + LIBGCC_HELPERS,
}
STATIC_EXPORTS = ("static", "static-shared-libgcc")
# Symbols of libstdc++ itself (not templates the probe instantiates).
LIBSTDCXX_SYMBOLS = ("_ZSt4cout", "_ZNSt6locale7classicEv", "__cxa_throw")
# A template facet's id: libstdc++ defines these as STB_GNU_UNIQUE objects.
# What the cxx-runtime rule names for a library that exports libstdc++.
LIBSTDCXX_RUNTIME = ("__cxa_throw", "__gxx_personality_v0", "_ZSt4cout", "_ZNSt6locale7classicEv")
COLLATE_ID = "_ZNSt7__cxx117collateIcE2idE"
VIEW_ERROR = "shape '[7]' is invalid for input of size 6"
IOS_INIT_MARKER = "_ZSt21ios_base_library_initv"


def _torch_root() -> Path:
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("torch is not installed")
    return Path(next(iter(spec.submodule_search_locations)))


def _torch_includes(torch: Path) -> list[str]:
    return [f"-I{torch}/include", f"-I{torch}/include/torch/csrc/api/include"]


def _compile(command: list[str]) -> str:
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    assert done.returncode == 0, f"{' '.join(command)}\n{done.stderr[-4000:]}"
    return done.stdout


@pytest.fixture(scope="module")
def libraries(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """probe.cpp compiled once, linked each way of LINKS."""
    if shutil.which("g++") is None:
        pytest.skip("no g++")
    torch = _torch_root()
    out = tmp_path_factory.mktemp("libstdcxx")
    obj = out / "probe.o"
    source = str(DATA / "probe.cpp")
    _compile(
        [
            "g++",
            "-std=c++20",
            "-O1",
            "-fPIC",
            "-w",
            *_torch_includes(torch),
            "-c",
            source,
            "-o",
            str(obj),
        ]
    )
    built = {}
    for name, flags in LINKS.items():
        library = out / f"libprobe-{name}.so"
        torch_libs = [f"-L{torch}/lib", "-lc10", "-ltorch_cpu", f"-Wl,-rpath,{torch}/lib"]
        _compile(["g++", "-shared", str(obj), "-o", str(library), *flags, *torch_libs])
        built[name] = library
    return built


@dataclass(frozen=True)
class Run:
    """One process that loaded a probe library: how it ended, what each step did."""

    returncode: int
    stdout: str
    steps: dict[str, dict[str, Any]]
    running: str | None  # the step that was under way when the process died

    def value(self, step: str) -> Any:
        assert "value" in self.steps[step], f"{step}: {self.steps[step]}"
        return self.steps[step]["value"]

    def raised(self, step: str) -> tuple[str, str]:
        outcome = self.steps[step]
        assert "raised" in outcome, f"{step}: {outcome}"
        return outcome["raised"], outcome["message"]

    def owners(self) -> set[str]:
        """The objects the probe's libstdc++ references were bound to."""
        return {entry.split("=", 1)[1] for entry in self.value("bindings")}


@pytest.fixture(scope="module")
def load(
    libraries: dict[str, Path], tmp_path_factory: pytest.TempPathFactory
) -> Callable[[str, str], Run]:
    """load(link, loading): probe_run.py on that library, once per pair."""
    records = tmp_path_factory.mktemp("records")

    @functools.cache
    def run(link: str, loading: str) -> Run:
        record = records / f"{link}-{loading}.json"
        command = [sys.executable, str(DATA / "probe_run.py"), str(libraries[link]), str(record)]
        done = subprocess.run(
            [*command, loading],
            capture_output=True,
            text=True,
            check=False,
            timeout=600,
            env={**os.environ, "HF_HUB_OFFLINE": "1"},
        )
        assert record.exists(), done.stderr[-4000:]
        data = json.loads(record.read_text())
        return Run(done.returncode, done.stdout, data["steps"], data["running"])

    return run


def _assert_every_operation_works(run: Run) -> None:
    assert run.returncode == 0 and run.running is None
    assert run.value("regex") == ["kernel@hub.org", "kernel", "hub"]
    assert run.value("format_int") == "1234567"
    assert run.value("format_grouped") == "1,234,567,"
    assert "probe: written to std::cout" in run.stdout.splitlines()
    assert run.value("catch_own") == "caught in the kernel"
    assert run.raised("throw_runtime") == ("RuntimeError", "thrown by the kernel")
    assert run.raised("torch_check") == ("RuntimeError", "checked by the kernel")
    assert run.value("catch_torch") == [VIEW_ERROR, VIEW_ERROR]
    assert run.value("device_name") == "cpu"
    assert run.value("format_int_after") == "1,234,567"
    assert run.value("regex_after") == ["id 42", "42"]


# ---------------------------------------------------------------------------
# What works


@pytest.mark.parametrize(
    ("link", "loading"),
    [
        ("dynamic", "local"),
        ("static-hidden-shared-unwinder", "local"),
        ("static-hidden-shared-unwinder", "global-libstdcxx"),
        # A static libstdc++ with default visibility is replaced by the
        # process's libstdc++.so.6 when that is in the global scope.
        ("static-shared-libgcc", "global-libstdcxx"),
        ("static", "global-libstdcxx"),
        # A static libgcc unwinder works once libgcc_s's has run.
        ("static-hidden", "torch-threw-first"),
    ],
)
def test_every_operation_works(load: Callable[[str, str], Run], link: str, loading: str) -> None:
    _assert_every_operation_works(load(link, loading))


@pytest.mark.parametrize(
    ("link", "loading", "owner", "torch_message"),
    [
        ("dynamic", "local", "libstdc++.so.6", "shape '[1,234,567]'"),
        ("static-shared-libgcc", "global-libstdcxx", "libstdc++.so.6", "shape '[1,234,567]'"),
        ("static", "global-libstdcxx", "libstdc++.so.6", "shape '[1,234,567]'"),
        ("static-shared-libgcc", "local", "", "shape '[1234567]'"),
        ("static-hidden", "torch-threw-first", "", "shape '[1234567]'"),
        ("static-hidden-shared-unwinder", "local", "", "shape '[1234567]'"),
        ("static-hidden-shared-unwinder", "global-libstdcxx", "", "shape '[1234567]'"),
    ],
)
def test_global_state_is_shared_only_with_one_libstdcxx(
    load: Callable[[str, str], Run],
    libraries: dict[str, Path],
    link: str,
    loading: str,
    owner: str,
    torch_message: str,
) -> None:
    """std::locale::global in the kernel reaches Torch's own formatting only
    when both use the same libstdc++; a hidden static copy keeps its own
    global locale, std::cout and exception state (owner "" = the library)."""
    run = load(link, loading)
    assert run.owners() == {owner or libraries[link].name}
    assert len(run.value("bindings")) == 6
    kind, message = run.raised("torch_formats_after")
    assert kind == "RuntimeError"
    assert message.startswith(torch_message)


def test_two_copies_count_uncaught_exceptions_apart(load: Callable[[str, str], Run]) -> None:
    """Each libstdc++ counts an exception thrown by its own __cxa_throw and
    uncounts one caught by its own __cxa_begin_catch: across the boundary the
    counts drift and stay wrong, [kernel's count, libstdc++.so.6's count]."""
    separate = load("static-hidden-shared-unwinder", "local")
    assert separate.value("uncaught_at_start") == [0, 0]
    # thrown by the kernel's copy, caught in Torch by libstdc++.so.6
    assert separate.value("uncaught_after_throw") == [1, -1]
    # two c10::Error thrown by Torch, caught by the kernel's copy
    assert separate.value("uncaught_after_catch") == [-1, 1]
    shared = load("dynamic", "local")
    for step in ("uncaught_at_start", "uncaught_after_throw", "uncaught_after_catch"):
        assert shared.value(step) == [0, 0]


# ---------------------------------------------------------------------------
# What breaks


def test_default_visibility_static_libstdcxx_loses_locale_facets(
    load: Callable[[str, str], Run], libraries: dict[str, Path]
) -> None:
    """The kernel binds to its own copy, except the GNU_UNIQUE facet ids,
    which the dynamic loader unifies with libstdc++.so.6's: the copy's
    locales no longer find their facets. A regex with a character class
    throws std::bad_cast; formatting a number silently yields nothing."""
    run = load("static-shared-libgcc", "local")
    assert run.returncode == 0 and run.running is None
    assert run.owners() == {libraries["static-shared-libgcc"].name}
    assert run.raised("regex") == ("RuntimeError", "std::bad_cast")
    assert run.raised("regex_after") == ("RuntimeError", "std::bad_cast")
    assert run.value("format_int") == ""
    assert run.value("format_grouped") == ""
    assert run.value("format_int_after") == ""
    # exceptions, strings and std::cout still work
    assert run.raised("throw_runtime") == ("RuntimeError", "thrown by the kernel")
    assert run.raised("torch_check") == ("RuntimeError", "checked by the kernel")
    assert "probe: written to std::cout" in run.stdout.splitlines()
    assert run.value("catch_torch") == [VIEW_ERROR, VIEW_ERROR]
    assert run.value("device_name") == "cpu"


@pytest.mark.parametrize(
    ("link", "dies_in"),
    [
        # today's flags: the regex's std::bad_cast cannot reach Torch
        ("static", "regex"),
        # hidden symbols fix the locale, not the unwinder
        ("static-hidden", "throw_runtime"),
    ],
)
def test_static_libgcc_aborts_when_a_kernel_exception_reaches_torch(
    load: Callable[[str, str], Run], link: str, dies_in: str
) -> None:
    """The kernel's static unwinder runs Torch frames' personality routine,
    which calls libgcc_s.so.1's _Unwind_SetGR; libgcc_s fills the register
    table that function reads only when its own unwinder first runs. In a
    fresh process nothing has, and libgcc_s aborts the process."""
    run = load(link, "local")
    assert run.returncode == -signal.SIGABRT
    assert run.running == dies_in
    assert all("value" in outcome for outcome in run.steps.values())
    wrote = "probe: written to std::cout" in run.stdout.splitlines()
    assert wrote == ("write_cout" in run.steps)


# ---------------------------------------------------------------------------
# What the libraries show without loading them


def _dynamic_symbols(library: Path) -> dict[str, tuple[str, str]]:
    """Defined dynamic symbols: name -> (binding, visibility)."""
    table = subprocess.run(
        ["readelf", "--dyn-syms", "-W", str(library)], capture_output=True, text=True, check=True
    ).stdout
    symbols = {}
    for line in table.splitlines():
        fields = line.split()
        if len(fields) >= 8 and fields[0].endswith(":") and fields[6] != "UND":
            symbols[fields[7].split("@")[0]] = (fields[4], fields[5])
    return symbols


@pytest.mark.parametrize("link", sorted(LINKS))
def test_which_libraries_export_their_libstdcxx(libraries: dict[str, Path], link: str) -> None:
    """A static libstdc++ with default visibility exports itself, its facet
    ids as UNIQUE symbols; --exclude-libs,ALL keeps all of it inside."""
    exported = _dynamic_symbols(libraries[link])
    if link in STATIC_EXPORTS:
        assert all(exported[name] == ("GLOBAL", "DEFAULT") for name in LIBSTDCXX_SYMBOLS)
        assert exported[COLLATE_ID] == ("UNIQUE", "DEFAULT")
    else:
        assert not set(exported) & {*LIBSTDCXX_SYMBOLS, COLLATE_ID}
    # libgcc_eh's unwinder is hidden even in a default-visibility link
    assert "_Unwind_RaiseException" not in exported


def _violations(library: Path, rule: BinaryRule) -> set[str]:
    """The subjects `rule` reports on `library` under the default policy."""
    binaries, problems = load_binaries(library.parent, library.name)
    assert not problems
    return {violation.subject for violation in rule(binaries[0], kernel_policy())}


@pytest.mark.parametrize("link", sorted(LINKS))
def test_which_libraries_carry_their_own_unwinder(libraries: dict[str, Path], link: str) -> None:
    """-static-libgcc brings libgcc_eh's unwinder: the library then imports
    no _Unwind_Resume, which every C++ library with cleanups calls."""
    imports_unwinder = "_Unwind_Resume" in read_elf(libraries[link]).undefined
    assert imports_unwinder == (STATIC_LIBGCC[0] not in LINKS[link])


def test_kernel_policy_refuses_every_link_but_the_recommended_one(
    libraries: dict[str, Path],
) -> None:
    """The library rule forbids the link that shares Torch's runtime; the
    cxx-runtime rule the ones that break in a process with Torch: an exported
    static libstdc++ (the locale) and a private unwinder (the abort). (The
    symbol-version rule is left out: this machine's static libstdc++ is built
    against its glibc 2.36, the hermetic toolchain's against 2.27.)"""
    flagged = {
        link: _violations(library, needed_libraries) | _violations(library, cxx_runtime)
        for link, library in libraries.items()
    }
    exported = ", ".join(LIBSTDCXX_RUNTIME)
    assert flagged == {
        "dynamic": {"libstdc++.so.6"},
        "static": {exported, "_dl_find_object"},
        "static-hidden": {"_dl_find_object"},
        "static-shared-libgcc": {exported},
        "static-hidden-shared-unwinder": set(),
    }


def test_shared_libgcc_helpers_exceed_the_policy_unless_linked_from_the_archive(
    tmp_path: Path,
) -> None:
    """A shared libgcc brings the unwinder and, unless libgcc.a comes first,
    every helper libgcc_s.so.1 exports: half-precision conversions need
    GCC_12.0.0 there, over the policy's GCC 7.0.0."""
    source = str(DATA / "half.cpp")
    shared, archive = tmp_path / "libhalf-shared.so", tmp_path / "libhalf-archive.so"
    _compile(["g++", "-shared", "-fPIC", "-O1", source, "-o", str(shared)])
    _compile(["g++", "-shared", "-fPIC", "-O1", source, *LIBGCC_HELPERS, "-o", str(archive)])
    assert _violations(shared, symbol_versions) == {
        "__extendhfsf2@GCC_12.0.0",
        "__truncsfhf2@GCC_12.0.0",
    }
    assert _violations(archive, symbol_versions) == set()


# ---------------------------------------------------------------------------
# The gcc 13 part: what can be seen here without a gcc 13


def test_torch_headers_bring_iostream_into_every_kernel_source(tmp_path: Path) -> None:
    """With gcc >= 13, <iostream> emits a reference to
    std::ios_base_library_init (GLIBCXX_3.4.32): any kernel source that
    includes Torch's headers would need that libstdc++ when linked to it."""
    source = tmp_path / "op.cpp"
    source.write_text("#include <torch/library.h>\n")
    headers = _compile(["g++", "-std=c++20", "-M", *_torch_includes(_torch_root()), str(source)])
    assert any(word.endswith("/iostream") for word in headers.split())


def test_torch_wheel_is_gcc_13_linked_to_an_older_libstdcxx() -> None:
    """Torch's own answer (the EL8 toolset approach): built by gcc 13 against
    an old libstdc++.so, so <iostream>'s marker stays an unversioned
    undefined symbol nothing relocates against, and no symbol needs a
    GLIBCXX above 3.4.22; it loads with this machine's libstdc++, which does
    not define the marker."""
    library = _torch_root() / "lib" / "libtorch_cpu.so"
    comment = subprocess.run(
        ["readelf", "-p", ".comment", str(library)], capture_output=True, text=True, check=True
    ).stdout
    assert "GCC: (GNU) 13." in comment
    undefined = read_elf(library).undefined
    assert undefined[IOS_INIT_MARKER] is None
    glibcxx = {v for v in undefined.values() if v and v.startswith("GLIBCXX_")}
    assert max(Version.parse(v.removeprefix("GLIBCXX_")) for v in glibcxx) == Version.parse(
        "3.4.22"
    )
    system = Path(_compile(["g++", "-print-file-name=libstdc++.so.6"]).strip())
    assert IOS_INIT_MARKER not in _dynamic_symbols(system)
