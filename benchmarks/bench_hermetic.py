"""What the hermetic toolchain costs (nix/toolchains/hermetic, docs/hermetic.md).

1. A cold build of examples/relu's torch213 CPU variant through its flake with
   the hermetic toolchain, in the sandbox, against the same variant through a
   flake with the host toolchain: both against the locked Torch 2.13 wheels,
   neither with a compiler cache (a Nix build has none), one core each. Each run
   deletes the variant from the store and builds it again, taking turns.
   Target: at most 1.10 x.
2. The first assembly of the toolchain after its download: every derivation of
   it that is not a download (busybox's applets, gcc and binutils, cmake, ninja,
   Python with kernelnix's dependencies, the glibc 2.27 sysroot) built in a
   fresh chroot store (`--store DIR`) that holds only the downloads, copied
   there. Target: at most 60 s, stated against the cold hermetic build above.
3. The download the toolchain adds to a fresh machine, in MB, in the detail of
   the second figure: its fixed-output files, the ziglang wheel of the glibc
   target (which the host toolchain fetches too) counted apart. The variant's
   Torch wheels, fetched by both toolchains, are not counted.

    python benchmarks/bench_hermetic.py [--runs N]
"""

from __future__ import annotations

import json
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Any

from figures import Figure, Unavailable, duration, runs_main, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from nix_projects import kernelnix_clone, make_project, nix  # noqa: E402
from paths import EXAMPLES  # noqa: E402

from kernelnix.host.toolchain_fetch import prefetch_toolchain  # noqa: E402

SYSTEM = "x86_64-linux"
BUILD_SETS = ("2.13-cpu",)
VARIANT = "torch213-cxx11-cpu-x86_64-linux"
SANDBOX = ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false")
ONE_CORE = ("--cores", "1", "--max-jobs", "1")
BUILD_TARGET = 1.10
ASSEMBLY_LIMIT_S = 60.0
MB = 1e6


def toolchain_expression(clone: Path) -> str:
    """The registry's toolchain of SYSTEM as a list of derivations (nix/registry)."""
    return (
        f"let s = (import {clone}/nix/registry {{ kernelnixSrc = {clone}; }}).systems.{SYSTEM};"
        " in (builtins.attrValues s.drvs) ++ [ s.glibcTarget ]"
    )


def cold_build(project: Path, env: dict[str, str], *options: str) -> float:
    """Delete the variant's output from the store, then time its build."""
    out = nix(project, env, "eval", "--raw", f".#{VARIANT}.outPath").stdout
    nix(project, env, "store", "delete", out)
    return timed(
        lambda: nix(project, env, "build", f".#{VARIANT}", "--no-link", *ONE_CORE, *options)
    )


def downloads(clone: Path, env: dict[str, str]) -> dict[str, int]:
    """The toolchain's fixed-output paths, with their sizes in the store."""
    graph: dict[str, Any] = json.loads(
        nix(clone, env, "show-derivation", "--recursive", "--impure", "--expr",
            toolchain_expression(clone)).stdout
    )  # fmt: skip
    paths = [
        output["path"]
        for drv in graph.values()
        if "hash" in drv["outputs"].get("out", {})
        for output in drv["outputs"].values()
    ]
    info = json.loads(nix(clone, env, "path-info", "--json", *paths).stdout)
    return {entry["path"]: int(entry["narSize"]) for entry in info}


def first_assembly(clone: Path, env: dict[str, str], fetched: dict[str, int], work: Path) -> float:
    """Build the toolchain in a chroot store holding only its downloads."""
    store = ("--store", str(work / "store"))
    nix(clone, env, "copy", "--no-check-sigs", "--to", str(work / "store"), *fetched)
    try:
        return timed(
            lambda: nix(clone, env, "build", "--no-link", "--impure", *store, *SANDBOX,
                        "--expr", toolchain_expression(clone))
        )  # fmt: skip
    finally:
        shutil.rmtree(work / "store", ignore_errors=True)


def download_text(fetched: dict[str, int]) -> str:
    zig = sum(size for path, size in fetched.items() if "ziglang" in path)
    rest = sum(fetched.values()) - zig
    return (
        f"its downloads: {rest / MB:.0f} MB in {len(fetched) - (1 if zig else 0)} files, "
        f"and the ziglang wheel of the glibc target ({zig / MB:.0f} MB), which the host "
        "toolchain fetches too"
    )


def measure(runs: int = 3) -> list[Figure]:
    if shutil.which("nix") is None:
        raise Unavailable("needs Nix (scripts/setup.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="bench-hermetic-") as tmp:
        work = Path(tmp)
        url, env = kernelnix_clone(work, BUILD_SETS)
        clone = Path(url.removeprefix("git+file://"))
        relu = EXAMPLES / "relu"
        host = make_project(relu, work / "host", url, env)
        hermetic = make_project(
            relu, work / "hermetic", url, env, ("--toolchain", "hermetic", "--no-host-record")
        )
        prefetch_toolchain(SYSTEM, lambda line: None)
        # Warm-up: the toolchain assembled, the wheels fetched and unpacked for both.
        nix(hermetic, env, "build", f".#{VARIANT}", "--no-link", *SANDBOX)
        nix(host, env, "build", f".#{VARIANT}", "--no-link")
        with_hermetic: list[float] = []
        with_host: list[float] = []
        for _ in range(runs):
            with_hermetic.append(cold_build(hermetic, env, *SANDBOX))
            with_host.append(cold_build(host, env))
        fetched = downloads(clone, env)
        assembly = first_assembly(clone, env, fetched, work)
    build = min(with_hermetic)
    return [
        Figure(
            name=f"cold nix build of relu's {VARIANT}, hermetic toolchain in the sandbox",
            seconds=build,
            baseline="the same variant with the host toolchain",
            baseline_seconds=min(with_host),
            target=BUILD_TARGET,
            target_text=f"at most {BUILD_TARGET:.2f} x",
            detail=f"best of {runs}, taking turns; one core, no compiler cache, "
            "toolchain and wheels already in the store",
        ),
        Figure(
            name="first assembly of the hermetic toolchain after its download "
            "(a fresh chroot store)",
            seconds=assembly,
            baseline="the cold hermetic build above",
            baseline_seconds=build,
            target=ASSEMBLY_LIMIT_S / build,
            target_text=f"at most {ASSEMBLY_LIMIT_S:.0f} s",
            detail=f"{duration(assembly)}; {download_text(fetched)}",
        ),
    ]


if __name__ == "__main__":
    runs_main(measure, 3)
