"""Run the benchmarks (`benchmarks/run`) and print every figure as a ratio
against a baseline timed in the same run, with its target and PASS or MISS.

    benchmarks/run [--quick] [--only NAME]... [--json FILE]

Names: plan, config, nix, rebuild, compile, checks, cuda, wheels, glibc, hermetic,
incremental, scaling, objects, and the heavy ones, run only when named with --only:
conformance (hours: every kernels-community CUDA kernel built, checked and imported;
docs/conformance.md). A full run takes 15 to 30 minutes on two cores without
incremental, scaling and objects, which build with Nix for about 5, 20 and 20 more
(nix builds the largest example three times from scratch, and bench_checks
compiles its CUDA libraries on first use); --quick takes fewer runs of each, not
fewer benchmarks. Exit status 1 when a benchmark fails to
run; a MISS is a result, not a failure.
"""

from __future__ import annotations

import argparse
import datetime
import importlib
import json
import os
import platform
import sys
import traceback
from dataclasses import asdict
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from figures import Figure, Unavailable, ratio_text

# name -> (what it measures, measure() arguments of a full run, of a --quick run)
BENCHMARKS: dict[str, tuple[str, dict[str, Any], dict[str, Any]]] = {
    "plan": ("bench_plan: planning the largest config", {"runs": 7}, {"runs": 3}),
    "config": (
        "bench_config: loading build.toml vs the reference parser",
        {"runs": 7},
        {"runs": 3},
    ),
    "nix": ("bench_nix: nix eval, nix build overhead, no-op nix build", {"runs": 3}, {"runs": 1}),
    "rebuild": ("bench_rebuild: no-op kernelnix build --local", {"runs": 5}, {"runs": 2}),
    "compile": ("bench_compile: our CMake project vs cpp_extension", {"repeat": 2}, {"repeat": 1}),
    "checks": ("bench_checks: kernelnix check vs kernel-abi-check", {"repeat": 7}, {"repeat": 3}),
    "cuda": (
        "bench_cuda: CUDA build vs cpp_extension; warm vs cold ccache",
        {"repeat": 1},
        {"repeat": 1},
    ),
    "wheels": (
        "bench_wheels: a bundle of two Torch releases from locked wheels vs its direct builds",
        {},
        {},
    ),
    # Best of 2 in a full run: one pair of builds varied by 6 s on a quiet machine.
    "incremental": (
        "bench_incremental: nix build after a one-file .cu edit, compiler cache on, vs cold",
        {"repeat": 2},
        {"repeat": 1},
    ),
    "hermetic": (
        "bench_hermetic: a cold variant build, hermetic toolchain vs host; its first assembly",
        {"runs": 3},
        {"runs": 1},
    ),
    "glibc": (
        "bench_glibc: a build against the glibc 2.27 target vs without; its first assembly",
        {"runs": 3},
        {"runs": 1},
    ),
    "scaling": (
        "bench_scaling: nix build of 1-8 variants at --max-jobs 1 and 2, per variant",
        {"counts": (1, 2, 4, 8), "max_jobs": (1, 2)},
        {"counts": (1, 2), "max_jobs": (1, 2)},
    ),
    "objects": (
        "bench_objects: object by object vs one derivation; an edit; flash-attention predicted",
        {"runs": 2},
        {"runs": 1},
    ),
    "conformance": (
        "bench_conformance: every kernels-community CUDA kernel built, checked, imported",
        {},
        {},
    ),
}
# Run only when named with --only, never by a plain or --quick run: hours of builds.
HEAVY = {"conformance"}


def selected(only: list[str] | None) -> list[str]:
    """The benchmarks a run measures: those named, else every one but the heavy ones."""
    return only or [name for name in BENCHMARKS if name not in HEAVY]


def machine() -> str:
    return (
        f"{datetime.date.today().isoformat()}, {platform.platform()}, "
        f"Python {platform.python_version()}, {os.cpu_count()} cores"
    )


def main() -> None:
    parser = argparse.ArgumentParser(prog="benchmarks/run", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer runs of each benchmark")
    parser.add_argument(
        "--only",
        action="append",
        choices=list(BENCHMARKS),
        help=f"run only NAME (repeatable); {', '.join(sorted(HEAVY))} only this way",
    )
    parser.add_argument("--json", type=Path, help="also write the figures to FILE as JSON")
    args = parser.parse_args()
    print(f"kernelnix benchmarks, {machine()}{', --quick' if args.quick else ''}", flush=True)
    figures: list[Figure] = []
    failed: list[str] = []
    for name in selected(args.only):
        title, full, quick = BENCHMARKS[name]
        print(f"\n== {title}", flush=True)
        try:
            module = importlib.import_module(f"bench_{name}")
            found = module.measure(**(quick if args.quick else full))
        except Unavailable as exc:  # one line: what this machine lacks
            print(f"not run: {exc}", flush=True)
            failed.append(name)
            continue
        except Exception:  # report it and go on with the other benchmarks
            traceback.print_exc()
            failed.append(name)
            continue
        for figure in found:
            print("\n".join(figure.lines()), flush=True)
        figures += found
    print("\n== summary")
    for figure in figures:
        bound = "" if figure.target is None else f" (<= {ratio_text(figure.target)})"
        print(f"{figure.verdict}  {ratio_text(figure.ratio) + bound:<20} {figure.name}")
    counts = {v: sum(f.verdict == v for f in figures) for v in ("PASS", "MISS", "INFO")}
    print(
        f"{counts['PASS']} PASS, {counts['MISS']} MISS"
        + (f", {counts['INFO']} without a target" if counts["INFO"] else "")
        + (f"; failed to run: {', '.join(failed)}" if failed else "")
    )
    if args.json:
        records = [{**asdict(f), "ratio": f.ratio, "verdict": f.verdict} for f in figures]
        document = {"machine": machine(), "figures": records}
        args.json.write_text(json.dumps(document, indent=2) + "\n")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
