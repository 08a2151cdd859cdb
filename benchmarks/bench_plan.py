"""Time to plan a big kernel project, beyond interpreter start-up.

Generates a project with 3,000+ source files, 12 kernel sections and every
backend, then times `kernelnix plan` (a fresh process, as a user runs it)
against a bare `python -c pass` measured in the same run, best of N, with
bytecode caching on. Target: under 200 ms beyond start-up (pydantic validates
build.toml and the plan: importing it, creating the models and building their
validators take most of that; see docs/performance.md). Two more fresh processes,
timed in the same runs, show what the command stands on: click, the CLI's glue,
pydantic and one validated model; and `load_config` of the same project, which
adds build.toml's models, their validator and the source checks. A second target
does not depend on the machine's speed: beyond start-up, `plan` costs at most
1.3 x that `load_config`.

    python benchmarks/bench_plan.py [--runs N]
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from statistics import median

from figures import Figure, beyond_startup, duration, python_env, run_quietly, runs_main, timed

BACKENDS = ["cpu", "cuda", "rocm", "xpu", "metal"]
TARGET_S = 0.200
# `plan` beyond start-up against `load_config` of the same project beyond start-up.
TARGET_OVER_CONFIG = 1.3


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


# What `kernelnix plan` stands on, each timed in a fresh process like the command, to
# say how much of its time planning could ever save. The plugin loader's stand-in is
# what the CLI's group callback installs before any command runs.
_CLI_PREAMBLE = """
import os, sys
from pathlib import Path
os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
import kernelnix.cli
kernelnix.cli._skip_plugin_loader()
"""
STACK = (
    _CLI_PREAMBLE
    + """
from pydantic import BaseModel
class Probe(BaseModel):
    x: int = 0
Probe.model_validate({"x": 1})
"""
)
LOAD_CONFIG = (
    _CLI_PREAMBLE
    + """
from kernelnix.config import load_config
load_config(Path(sys.argv[1]))
"""
)


def measure(runs: int = 7) -> list[Figure]:
    """`kernelnix plan` of the big project in a fresh process against `python -c pass`
    and, beyond start-up, against `load_config` of the same project; for the record,
    the stack under it and that `load_config` against `python -c pass`."""
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        files = make_project(root)
        out = root / "plan.json"
        commands = {
            "bare": [sys.executable, "-c", "pass"],
            "stack": [sys.executable, "-c", STACK],
            "config": [sys.executable, "-c", LOAD_CONFIG, str(root)],
            "plan": [sys.executable, "-m", "kernelnix", "plan", str(root), "-o", str(out),
                     "--unique-id", "bench"],
        }  # fmt: skip
        env = python_env()
        # Interleaved, so that a slow spell of a shared machine hits every command alike.
        times: dict[str, list[float]] = {name: [] for name in commands}
        for _ in range(runs):
            for name, command in commands.items():
                times[name].append(timed(lambda: run_quietly(command, env)))  # noqa: B023
        size = out.stat().st_size
    bare, best = min(times["bare"]), min(times["plan"])
    stack, config = min(times["stack"]), min(times["config"])

    return [
        Figure(
            name=f"kernelnix plan of the largest config ({files} files, 12 kernels, 5 backends)",
            seconds=best,
            baseline="python -c pass",
            baseline_seconds=bare,
            target=(bare + TARGET_S) / bare,
            target_text=f"start-up + {TARGET_S * 1000:.0f} ms",
            detail=f"best of {runs}, {beyond_startup(best, bare)}; "
            f"median {duration(median(times['plan']))}; plan file {size / 1024:.0f} KiB",
        ),
        Figure(
            name="kernelnix plan against load_config of the same config, beyond start-up",
            seconds=best - bare,
            baseline="load_config beyond start-up",
            baseline_seconds=config - bare,
            target=TARGET_OVER_CONFIG,
            target_text="plan costs at most 30 % more than loading its config",
            detail=f"best of {runs} of each, interleaved; whole processes: plan "
            f"{duration(best)}, load_config {duration(config)}, python -c pass {duration(bare)}",
        ),
        *(
            Figure(
                name=f"under it: {what}",
                seconds=seconds,
                baseline="python -c pass",
                baseline_seconds=bare,
                target=None,
                target_text=f"none: {why}",
                detail=f"best of {runs}, {beyond_startup(seconds, bare)}",
            )
            for what, seconds, why in (
                (
                    "click, the CLI's glue, pydantic and one validated model",
                    stack,
                    "what every command that validates pays",
                ),
                (
                    "load_config of the same project (build.toml's models, validator, "
                    "source checks)",
                    config,
                    "what planning stands on",
                ),
            )
        ),
    ]


if __name__ == "__main__":
    runs_main(measure, 7)
