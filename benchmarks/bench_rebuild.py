"""A no-op rebuild without Nix: a second `kernelnix build --local` when nothing
changed.

The example is copied and committed to a fresh git repository (a stable op
namespace, as in a real kernel repository) and its variant for this Python's
Torch release is built once (`--variant`: `build --local` alone also builds the
variants of every other locked Torch); then the rebuild
is timed in a fresh process, best of N. It still configures (from the CMake
cache), lets Ninja find nothing to do, installs and runs the post-build
checks, whose import check loads Torch: the baseline is `python -c "import
torch"` of the same Torch (the variant's locked wheels, a CUDA build from PyPI
even for a CPU variant, when the lock has them), timed in the same run. Target:
at most twice that import.

    python benchmarks/bench_rebuild.py [--runs N] [--example NAME]
"""

from __future__ import annotations

import argparse
import os
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
from kernelnix.host.environments import (  # noqa: E402
    environment_variables,
    locked_environment,
    materialize,
)
from kernelnix.host.machine import why_not_buildable  # noqa: E402
from kernelnix.host.system import current_system  # noqa: E402
from kernelnix.plan.build import PlanOptions, build_plan  # noqa: E402

TARGET = 2.0


def rebuilt_variant(project: Path) -> tuple[str, dict[str, str]]:
    """The variant of `project` for this Python's Torch release, and the environment
    its build step and import check run in: its locked wheels' when the lock has
    them (`build --local` then builds it there, in that Torch), else this Python's."""
    system = current_system()
    plan = build_plan(load_config(project), PlanOptions(systems=(system,)))
    for name, variant in plan.variants[system].items():
        if variant.kind != "noarch" and why_not_buildable(variant, locked_wheels=False) is None:
            environment = locked_environment(variant)
            if environment is None:
                return name, dict(os.environ)
            root = materialize(environment, log=lambda line: None)
            return name, environment_variables([root], dict(os.environ))
    raise Unavailable(f"this Python's Torch builds no variant of {project.name}")


def measure(runs: int = 5, example: str = "relu") -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        project = Path(tmp) / example
        ignored = shutil.ignore_patterns("build", "result", "__pycache__")
        shutil.copytree(EXAMPLES / example, project, ignore=ignored)
        git(project, "init", "-q")
        git(project, "add", "-A")
        git(project, "commit", "-q", "-m", "bench")
        variant, environment = rebuilt_variant(project)
        build = [sys.executable, "-m", "kernelnix", "build", "--local", str(project)]
        build += ["--variant", variant]
        run_quietly(build)  # the first build compiles
        best, median = best_and_median(lambda: run_quietly(build), runs)
        import_torch = [sys.executable, "-c", "import torch"]
        torch, _ = best_and_median(lambda: run_quietly(import_torch, environment), runs)
    return [
        Figure(
            name=f"no-op rebuild: a second kernelnix build --local of {example}'s {variant}, "
            "nothing changed",
            seconds=best,
            baseline='python -c "import torch", the Torch the import check loads',
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
