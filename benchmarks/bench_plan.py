"""Time to plan a big kernel project, beyond interpreter start-up.

Generates a project with 3,000+ source files, 12 kernel sections and every
backend, then times `kernelnix plan` (a fresh process, as a user runs it)
against a bare `python -c pass` measured in the same run. Target: under 150 ms
beyond start-up.

    python benchmarks/bench_plan.py [--runs N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

BACKENDS = ["cpu", "cuda", "rocm", "xpu", "metal"]
TARGET_MS = 150.0


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


def best_of(command: list[str], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        subprocess.run(command, check=True, capture_output=True)
        times.append(time.perf_counter() - start)
    return min(times) * 1000, statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
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
        bare_min, bare_med = best_of([sys.executable, "-c", "pass"], args.runs)
        plan_min, plan_med = best_of(plan, args.runs)
        size = out.stat().st_size
    beyond = plan_min - bare_min
    print(f"project: {files} source files, 12 kernel sections, backends {', '.join(BACKENDS)}")
    print(f"python -c pass:  best {bare_min:7.1f} ms   median {bare_med:7.1f} ms")
    print(
        f"kernelnix plan:  best {plan_min:7.1f} ms   median {plan_med:7.1f} ms "
        f"(plan file {size / 1024:.0f} KiB)"
    )
    print(
        f"beyond start-up: {beyond:.1f} ms; target {TARGET_MS:.0f} ms; "
        f"ratio to target {beyond / TARGET_MS:.2f}"
    )


if __name__ == "__main__":
    main()
