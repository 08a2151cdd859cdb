"""What Nix costs on top of the build itself.

1. `nix eval --json .#variants` on the largest example (most source files),
   the median of several runs after a warm-up, against Nix's start-up
   (`nix eval --expr 1`). Target: under 1 s.
2. `nix build .#bundle` against running the same build step directly
   (`kernelnix build-variant` for the same variant into a temp dir), each
   from scratch (the Nix outputs are deleted from the store between runs),
   as a ratio. Neither side uses a compiler cache: a Nix build has none (no
   writable home), so the direct one runs with KERNELNIX_COMPILER_LAUNCHER=none.
   Target: overhead under 15 %.
3. A no-op rebuild: a second `nix build .#<variant>` of a variant already in
   the store, against `nix eval` of the same attribute's output path.
   Target: at most 1.5 times the evaluation.

    python benchmarks/bench_nix.py [--runs N] [--example NAME]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

from figures import Figure, duration, report, run_quietly, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from nix_projects import (  # noqa: E402
    clone_worktree,
    make_project,
    nix,
    nix_environment,
)
from paths import EXAMPLES  # noqa: E402

from kernelnix.config import load_config  # noqa: E402
from kernelnix.plan.build import PlanOptions, build_plan  # noqa: E402

EVAL_TARGET_S = 1.0
OVERHEAD_TARGET = 0.15
NOOP_TARGET = 1.5


def largest_example() -> Path:
    def size(example: Path) -> int:
        plan = build_plan(load_config(example), PlanOptions(unique_id="bench"))
        return len(plan.sources)

    return max((p for p in EXAMPLES.iterdir() if (p / "build.toml").is_file()), key=size)


def direct_build(project: Path, variant: str, env: dict[str, str]) -> None:
    with tempfile.TemporaryDirectory() as out:
        run_quietly(
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
            env,
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
    found: list[str] = json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)
    return found


def median_time(action: Callable[[], object], runs: int) -> float:
    return statistics.median(timed(action) for _ in range(runs))


def measure(runs: int = 3, example: Path | None = None) -> list[Figure]:
    """The three figures on `example` (default: the largest), medians of `runs`."""
    example = example or largest_example()
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url = clone_worktree(work / "kernelnix")
        env = nix_environment(work / "registry.json", url)
        project = make_project(example, work / example.name, url, env)
        nix(project, env, "build", ".#bundle")  # warm-up: lock file, sources in the store
        variants = sorted(p.name for p in (project / "result").iterdir() if p.name != "benchmarks")
        evals = max(runs, 5)
        startup = median_time(lambda: nix(project, env, "eval", "--expr", "1"), evals)
        eval_s = median_time(lambda: variants_of(project, env), evals)
        attribute = f".#{variants[0]}"
        out_path = median_time(
            lambda: nix(project, env, "eval", "--raw", f"{attribute}.outPath"), evals
        )
        noop = median_time(lambda: nix(project, env, "build", attribute), evals)
        direct, via_nix = [], []
        uncached = {**env, "KERNELNIX_COMPILER_LAUNCHER": "none"}  # as in the Nix build
        for _ in range(runs):
            direct.append(
                sum(timed(lambda v=v: direct_build(project, v, uncached)) for v in variants)
            )
            via_nix.append(nix_build_from_scratch(project, env, variants))
    built = f"{example.name}: {', '.join(variants)}"
    return [
        Figure(
            name=f"nix eval --json .#variants ({example.name})",
            seconds=eval_s,
            baseline="nix eval --expr 1 (Nix start-up)",
            baseline_seconds=startup,
            target=EVAL_TARGET_S / startup,
            target_text=f"under {duration(EVAL_TARGET_S)}",
            detail=f"medians of {evals}",
        ),
        Figure(
            name=f"nix build .#bundle from scratch ({built})",
            seconds=statistics.median(via_nix),
            baseline="the same build step run directly (kernelnix build-variant)",
            baseline_seconds=statistics.median(direct),
            target=1 + OVERHEAD_TARGET,
            target_text=f"Nix overhead under {OVERHEAD_TARGET * 100:.0f} %",
            detail=f"medians of {runs}",
        ),
        Figure(
            name=f"no-op rebuild: a second nix build {attribute} (already built)",
            seconds=noop,
            baseline=f"nix eval {attribute}.outPath",
            baseline_seconds=out_path,
            target=NOOP_TARGET,
            target_text="little beyond evaluating the attribute",
            detail=f"medians of {evals}",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--example", help="example name (default: the largest)")
    args = parser.parse_args()
    report(measure(args.runs, EXAMPLES / args.example if args.example else None))


if __name__ == "__main__":
    main()
