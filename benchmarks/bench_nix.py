"""What Nix costs on top of the build itself.

1. `nix eval --json .#variants` on the largest example (most source files):
   the median of several runs after a warm-up. Target: under 1 s.
2. `nix build .#bundle` against running the same build step directly
   (`kernelnix build-variant` for the same variant into a temp dir), each
   from scratch (the Nix outputs are deleted from the store between runs),
   as a ratio. Target: overhead under 15 %.

    python benchmarks/bench_nix.py [--runs N] [--example NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from nix_projects import (  # noqa: E402
    EXAMPLES,
    clone_worktree,
    make_project,
    nix,
    nix_environment,
)

from kernelnix.config import load_config  # noqa: E402
from kernelnix.plan import PlanOptions, build_plan, current_system  # noqa: E402

EVAL_TARGET_S = 1.0
OVERHEAD_TARGET = 0.15


def largest_example() -> Path:
    def size(example: Path) -> int:
        plan = build_plan(load_config(example), PlanOptions(unique_id="bench"))
        return len(plan["sources"])

    return max((p for p in EXAMPLES.iterdir() if (p / "build.toml").is_file()), key=size)


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def direct_build(project: Path, variant: str, env: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as out:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "kernelnix",
                "build-variant",
                "--plan",
                str(project / "kernelnix-plan.json"),
                "--variant",
                variant,
                "--source",
                str(project),
                "--out",
                f"{out}/out",
                "--unique-id",
                "bench",
                "--toolchain",
                "host",
            ],
            check=True,
            capture_output=True,
            env=env,
        )


def nix_build_from_scratch(project: Path, env: dict[str, str], variants: list[str]) -> float:
    """Delete the bundle and its variants from the store, then time `nix build .#bundle`."""
    outputs = [
        nix(project, env, "eval", "--raw", f".#{attr}.outPath").stdout
        for attr in ["bundle", *variants]
    ]
    (project / "result").unlink(missing_ok=True)
    nix(project, env, "store", "delete", *outputs)
    return timed(lambda: nix(project, env, "build", ".#bundle"))


def variants_of(project: Path, env: dict[str, str]) -> list[str]:
    found: dict[str, list[str]] = json.loads(
        nix(project, env, "eval", "--json", ".#variants").stdout
    )
    return found[current_system()]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--example", help="example name (default: the largest)")
    args = parser.parse_args()
    example = EXAMPLES / args.example if args.example else largest_example()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url = clone_worktree(work / "kernelnix")
        env = nix_environment(work / "registry.json", url)
        project = make_project(example, work / example.name, url, env)
        nix(project, env, "build", ".#bundle")  # warm-up: lock file, sources in the store
        variants = sorted(p.name for p in (project / "result").iterdir() if p.name != "benchmarks")
        evals = [timed(lambda: variants_of(project, env)) for _ in range(max(args.runs, 5))]
        eval_s = statistics.median(evals)
        print(f"example: {example.name}; bundle here: {', '.join(variants)}")
        print(
            f"nix eval .#variants: {eval_s * 1000:.0f} ms median of {len(evals)} "
            f"(target < {EVAL_TARGET_S * 1000:.0f} ms) "
            f"{'OK' if eval_s < EVAL_TARGET_S else 'OVER'}"
        )
        direct, via_nix = [], []
        for _ in range(args.runs):
            direct.append(sum(timed(lambda v=v: direct_build(project, v, env)) for v in variants))
            via_nix.append(nix_build_from_scratch(project, env, variants))
        d, n = statistics.median(direct), statistics.median(via_nix)
        overhead = n / d - 1
        print(f"build step directly (kernelnix build-variant): {d:.2f} s median of {args.runs}")
        print(f"nix build .#bundle from scratch:                {n:.2f} s median of {args.runs}")
        print(
            f"ratio nix/direct: {n / d:.3f} -> overhead {overhead * 100:+.1f} % "
            f"(target < {OVERHEAD_TARGET * 100:.0f} %) "
            f"{'OK' if overhead < OVERHEAD_TARGET else 'OVER'}"
        )


if __name__ == "__main__":
    main()
