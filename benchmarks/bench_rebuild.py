"""A no-op rebuild without Nix: a second `kernelnix build --local` when nothing
changed.

The example is copied and committed to a fresh git repository (a stable op
namespace, as in a real kernel repository) and its variant for this Python's
Torch is built once (`--variant`: `build --local` alone also builds the variants
of every other locked Torch, each in its own environment); then the rebuild
is timed in a fresh process, best of N. It still configures (from the CMake
cache), lets Ninja find nothing to do, installs and runs the post-build
checks, whose import check loads Torch: the baseline is `python -c "import
torch"`, timed in the same run. Target: at most twice that import.

    python benchmarks/bench_rebuild.py [--runs N] [--example NAME]
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from pathlib import Path

from figures import Figure, Unavailable, best_and_median, duration, report, run_quietly

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from nix_projects import git  # noqa: E402
from paths import EXAMPLES  # noqa: E402

from kernelnix.config import load_config  # noqa: E402
from kernelnix.host.machine import why_not_buildable  # noqa: E402
from kernelnix.host.system import current_system  # noqa: E402
from kernelnix.plan.build import PlanOptions, build_plan  # noqa: E402

TARGET = 2.0


def host_torch_variant(project: Path) -> str:
    """The compiled variant of `project` that this Python's Torch builds."""
    system = current_system()
    plan = build_plan(load_config(project), PlanOptions(systems=(system,)))
    for name, variant in plan.variants[system].items():
        if variant.kind != "noarch" and why_not_buildable(variant, locked_wheels=False) is None:
            return name
    raise Unavailable(f"this Python's Torch builds no variant of {project.name}")


def measure(runs: int = 5, example: str = "relu") -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / example
        ignored = shutil.ignore_patterns("build", "result", "__pycache__")
        shutil.copytree(EXAMPLES / example, project, ignore=ignored)
        git(project, "init", "-q")
        git(project, "add", "-A")
        git(project, "commit", "-q", "-m", "bench")
        variant = host_torch_variant(project)
        build = [sys.executable, "-m", "kernelnix", "build", "--local", str(project)]
        build += ["--variant", variant]
        run_quietly(build)  # the first build compiles
        best, median = best_and_median(lambda: run_quietly(build), runs)
        torch, _ = best_and_median(
            lambda: run_quietly([sys.executable, "-c", "import torch"]), runs
        )
    return [
        Figure(
            name=f"no-op rebuild: a second kernelnix build --local of {example}'s {variant}, "
            "nothing changed",
            seconds=best,
            baseline='python -c "import torch"',
            baseline_seconds=torch,
            target=TARGET,
            target_text="the import check's Torch import, and as much again for the rest",
            detail=f"best of {runs}; median {duration(median)}",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--example", default="relu")
    args = parser.parse_args()
    report(measure(args.runs, args.example))


if __name__ == "__main__":
    main()
