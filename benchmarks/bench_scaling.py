"""How the cost of a bundle grows with its variants (docs/distributed.md): `nix build`
of 1, 2, 4 and 8 variant derivations of a small kernel, at `--max-jobs 1` and
`--max-jobs 2` (`--cores` = the machine's cores / max-jobs, so builds never ask for
more cores than there are), with wall time per variant; and the peak memory of one
compiler job (nvcc with --cuda), what decides how many may run at once.

The N variants are N copies of the kernel's one variant, each its own derivation
(a comment apart), so that every variant costs the same compile work and the figures
show how Nix and the machine scale, not how variants differ (and they need no
locked wheels). Each run builds from scratch (new derivations).

    python benchmarks/bench_scaling.py [--counts 1 2 4 8] [--max-jobs 1 2] [--cuda]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path

from figures import Figure, report, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from cuda_torch import VARIANT, cuda_torch_missing, with_cuda_torch  # noqa: E402
from nix_projects import clone_worktree, git, make_project, nix, nix_environment  # noqa: E402
from paths import EXAMPLES  # noqa: E402

# (example, the source a copy's comment goes into) for the CPU and the CUDA kernel.
KERNELS = {
    False: ("relu", "relu_cpu/relu_cpu.cpp"),
    True: ("fused-scale", "fused_scale_cuda/kernels.cu"),
}

# A compiler launcher that appends the peak memory (KiB) of each compile, with the
# processes it starts (nvcc: cicc, ptxas), to $KERNELNIX_BENCH_MEMORY.
LAUNCHER = """\
import os, sys
pid = os.fork()
if pid == 0:
    os.execvp(sys.argv[1], sys.argv[1:])
_, status, usage = os.wait4(pid, 0)
with open(os.environ["KERNELNIX_BENCH_MEMORY"], "a") as log:
    log.write(f"{usage.ru_maxrss} {os.path.basename(sys.argv[1])}\\n")
sys.exit(os.waitstatus_to_exitcode(status))
"""


def copies(project: Path, source: str, count: int, work: Path) -> list[Path]:
    """`count` copies of `project`, each with a comment no other build has seen."""
    made = []
    work.mkdir(parents=True)
    for index in range(count):
        copy = work / f"{project.name}-{index}"
        subprocess.run(["cp", "-a", str(project), str(copy)], check=True)
        edited = copy / source
        edited.write_text(edited.read_text() + f"// copy {uuid.uuid4()}\n")
        git(copy, "add", "-A")
        made.append(copy)
    return made


def build_all(projects: list[Path], variant: str, env: dict[str, str], max_jobs: int) -> float:
    cores = max(1, (os.cpu_count() or 1) // max_jobs)
    refs = [f"{p}#{variant}" for p in projects]
    options = ["--no-link", "--max-jobs", str(max_jobs), "--cores", str(cores)]
    return timed(lambda: nix(projects[0], env, "build", *refs, *options))


def peak_compile_memory(project: Path, variant: str, env: dict[str, str], work: Path) -> str:
    """The largest peak memory of one compile of the variant, measured by building it
    once directly (`kernelnix build-variant`) through LAUNCHER."""
    launcher, log = work / "launcher.py", work / "memory.log"
    launcher.write_text(f"#!{sys.executable}\n{LAUNCHER}")
    launcher.chmod(0o755)
    python = json.loads((project / "kernelnix-host.json").read_text())["python"]
    subprocess.run(
        [python, "-m", "kernelnix", "build-variant", "--plan", str(project / "kernelnix-plan.json"),
         "--variant", variant, "--source", str(project), "--out", str(work / "direct"),
         "--no-import-check"],
        env={**env, "KERNELNIX_COMPILER_LAUNCHER": str(launcher),
             "KERNELNIX_BENCH_MEMORY": str(log)},
        check=True, capture_output=True,
    )  # fmt: skip
    entries = [line.split() for line in log.read_text().splitlines()]
    kib, tool = max((int(k), t) for k, t in entries)
    return f"{kib / 1024:.0f} MiB ({tool}, the largest of {len(entries)} compiles)"


def measure(
    counts: tuple[int, ...] = (1, 2, 4, 8), max_jobs: tuple[int, ...] = (1, 2), cuda: bool = False
) -> list[Figure]:
    example, source = KERNELS[cuda]
    if cuda and (missing := cuda_torch_missing()):
        raise RuntimeError(missing)
    with tempfile.TemporaryDirectory(prefix="bench-scaling-") as tmp:
        work = Path(tmp)
        url = clone_worktree(work / "kernelnix")
        env = nix_environment(work / "registry.json", url)
        env = with_cuda_torch(env) if cuda else {**env, "PYTHONPATH": str(ROOT)}
        project = make_project(EXAMPLES / example, work / example, url, env)
        variant = (
            VARIANT
            if cuda
            else json.loads(nix(project, env, "eval", "--json", ".#variants").stdout)[0]
        )
        memory = peak_compile_memory(project, variant, env, work)
        per_variant: dict[tuple[int, int], float] = {}
        for jobs in max_jobs:
            for count in counts:
                batch = copies(project, source, count, work / f"j{jobs}-n{count}")
                per_variant[jobs, count] = build_all(batch, variant, env, jobs) / count
    base = per_variant[max_jobs[0], counts[0]]
    growth = "; ".join(
        f"--max-jobs {j}: {per_variant[j, counts[-1]] / per_variant[j, counts[0]]:.2f}x"
        for j in max_jobs
    )
    figures = [
        Figure(
            name=f"{example} {variant}: {count} variants, --max-jobs {jobs}, per variant",
            seconds=per_variant[jobs, count],
            baseline=f"1 variant at --max-jobs {max_jobs[0]}",
            baseline_seconds=base,
            target=None,
            target_text="measured: how the cost grows",
            detail=f"peak memory of one compile: {memory}" if (jobs, count) == (1, 1) else "",
        )
        for jobs in max_jobs
        for count in counts
    ]
    last = figures[-1]
    figures[-1] = Figure(
        **{
            **last.__dict__,
            "detail": f"time per variant at {counts[-1]} variants against {counts[0]}: {growth}",
        }
    )
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--max-jobs", type=int, nargs="+", default=[1, 2])
    parser.add_argument("--cuda", action="store_true", help="fused-scale's CUDA variant")
    args = parser.parse_args()
    report(measure(tuple(args.counts), tuple(args.max_jobs), args.cuda))


if __name__ == "__main__":
    main()
