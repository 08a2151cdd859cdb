"""Time to plan a big kernel project, beyond interpreter start-up.

Generates a project with 3,000+ source files, 12 kernel sections and every
backend, then times `kernelnix plan` (a fresh process, as a user runs it)
against a bare `python -c pass` measured in the same run, best of N, with
bytecode caching on. Target: under 200 ms beyond start-up (pydantic validates
build.toml and the plan: importing it, creating the models and building their
validators take most of that; see docs/performance.md).

    python benchmarks/bench_plan.py [--runs N]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

from figures import Figure, best_and_median, duration, python_env, run_quietly, runs_main

BACKENDS = ["cpu", "cuda", "rocm", "xpu", "metal"]
TARGET_S = 0.200


def make_project(root: Path, files_per_kernel: int = 260) -> int:
    kernels = []
    count = 0
    for index in range(12):
        backend = BACKENDS[index % len(BACKENDS)]
        folder = root / f"k{index}"
        folder.mkdir()
        sources = []
        for n in range(files_per_kernel):
            path = folder / f"f{n}.cpp"
            path.write_text("// source\n")
            sources.append(f'"k{index}/f{n}.cpp"')
        count += files_per_kernel
        extra = (
            'cuda-capabilities = ["8.0", "9.0", "10.0"]\ncuda-minver = "12.8"\n'
            if backend == "cuda"
            else ""
        )
        kernels.append(
            f'[kernel.k{index}]\nbackend = "{backend}"\ndepends = ["torch"]\n'
            f"src = [{', '.join(sources)}]\n{extra}"
        )
    package = root / "torch-ext" / "big"
    package.mkdir(parents=True)
    for n in range(40):
        (package / f"m{n}.py").write_text("x = 1\n")
    (root / "torch-ext" / "torch_binding.cpp").write_text("// binding\n")
    (root / "build.toml").write_text(
        '[general]\nname = "big"\nversion = 1\nedition = 5\nlicense = "MIT"\n'
        f"backends = {BACKENDS!r}\n".replace("'", '"')
        + '[torch]\nsrc = ["torch-ext/torch_binding.cpp"]\n'
        + "\n".join(kernels)
    )
    return count + 40


def measure(runs: int = 7) -> list[Figure]:
    """`kernelnix plan` of the big project in a fresh process against `python -c pass`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = make_project(root)
        out = root / "plan.json"
        plan = [
            sys.executable,
            "-m",
            "kernelnix",
            "plan",
            str(root),
            "-o",
            str(out),
            "--unique-id",
            "bench",
        ]
        env = python_env()
        bare, _ = best_and_median(lambda: run_quietly([sys.executable, "-c", "pass"], env), runs)
        best, median = best_and_median(lambda: run_quietly(plan, env), runs)
        size = out.stat().st_size
    return [
        Figure(
            name=f"kernelnix plan of the largest config ({files} files, 12 kernels, 5 backends)",
            seconds=best,
            baseline="python -c pass",
            baseline_seconds=bare,
            target=(bare + TARGET_S) / bare,
            target_text=f"start-up + {TARGET_S * 1000:.0f} ms",
            detail=f"best of {runs}; median {duration(median)}; plan file {size / 1024:.0f} KiB",
        )
    ]


if __name__ == "__main__":
    runs_main(measure, 7)
