"""Loading build.toml: kernelnix's `load_config` against the reference parser
(`kernels._rust.Build.open`, kernel-builder's Rust parser as the `kernels`
package bundles it) on the same files in the same process, and what a first
load costs a fresh process (importing the config layer, building the edition's
validator, loading) beyond interpreter start-up, and a whole `kernelnix
check-config` in a fresh process. Targets: load_config at most 5 times the Rust
parser per file; check-config within 300 ms of interpreter start-up.

    python benchmarks/bench_config.py [--runs N]
"""

from __future__ import annotations

import importlib.machinery
import importlib.util
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from bench_plan import make_project
from figures import (
    Figure,
    best_and_median,
    beyond_startup,
    duration,
    python_env,
    run_quietly,
    runs_main,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from paths import EXAMPLES, TESTS  # noqa: E402

from kernelnix.config import load_config  # noqa: E402

PER_FILE_TARGET = 5.0
CHECK_CONFIG_TARGET_S = 0.300
FRESH_LOAD = (
    "import sys; from pathlib import Path; from kernelnix.config import load_config; "
    "load_config(Path(sys.argv[1]))"
)


def reference_parser() -> ModuleType:
    """`kernels._rust` alone: importing the `kernels` package takes half a second
    (huggingface_hub), which is no part of parsing."""
    spec = importlib.util.find_spec("kernels")
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the `kernels` package (a test dependency) is not installed")
    (library,) = Path(spec.submodule_search_locations[0]).glob("_rust*.so")
    loader = importlib.machinery.ExtensionFileLoader("kernels._rust", str(library))
    module = importlib.util.module_from_spec(importlib.util.spec_from_loader(loader.name, loader))
    loader.exec_module(module)
    return module


def shared_configs(reference: ModuleType) -> list[Path]:
    """The examples and good test configs of edition 5 that the reference accepts
    too (it refuses v3 files and prints a warning for each v4 file)."""
    candidates = sorted(EXAMPLES.glob("*/build.toml")) + sorted(
        (TESTS / "data" / "configs" / "good").glob("*/build.toml")
    )
    return [
        path.parent
        for path in candidates
        if load_config(path.parent).shape == "5" and _opens(reference, path.parent)
    ]


def _opens(reference: ModuleType, directory: Path) -> bool:
    try:
        reference.Build.open(str(directory))
    except ValueError:  # e.g. `cuda-capabilities` in [torch-noarch]
        return False
    return True


def per_file(action: Callable[[Path], object], directories: list[Path], runs: int) -> float:
    """Best time of one pass over `directories`, per directory."""

    def one_pass() -> None:
        for directory in directories:
            action(directory)

    best, _ = best_and_median(one_pass, runs)
    return best / len(directories)


def in_process(runs: int, reference: ModuleType, big: Path) -> list[Figure]:
    configs = shared_configs(reference)
    figures = []
    for name, directories, repeat in (
        (f"{len(configs)} edition-5 examples and good test configs", configs, 20),
        ("the largest config (3,160 files, 12 kernels)", [big], 5),
    ):
        ours = per_file(load_config, directories * repeat, runs)
        theirs = per_file(lambda d: reference.Build.open(str(d)), directories * repeat, runs)
        figures.append(
            Figure(
                name=f"load_config per file: {name}",
                seconds=ours,
                baseline="kernels._rust.Build.open, the same files",
                baseline_seconds=theirs,
                target=PER_FILE_TARGET,
                target_text=f"at most {PER_FILE_TARGET:.0f} times the compiled Rust parser",
                detail=f"best of {runs} passes; each file {repeat} times a pass",
            )
        )
    return figures


def fresh_process(runs: int) -> Figure:
    python = sys.executable
    env = python_env()
    relu = str(EXAMPLES / "relu")
    bare, _ = best_and_median(lambda: run_quietly([python, "-c", "pass"], env), runs)
    load = [python, "-c", FRESH_LOAD, relu]
    best, median = best_and_median(lambda: run_quietly(load, env), runs)
    importing = [python, "-c", "import kernelnix.config.load"]
    imported, _ = best_and_median(lambda: run_quietly(importing, env), runs)
    return Figure(
        name="a first load_config in a fresh process (examples/relu)",
        seconds=best,
        baseline="python -c pass",
        baseline_seconds=bare,
        target=None,
        target_text="none (bench_plan has the end-to-end target)",
        detail=f"best of {runs}; median {duration(median)}; {beyond_startup(best, bare)}, "
        f"of which importing kernelnix.config.load {duration(imported - bare)}",
    )


def fresh_check_config(runs: int) -> Figure:
    python = sys.executable
    env = python_env()
    bare, _ = best_and_median(lambda: run_quietly([python, "-c", "pass"], env), runs)
    check = [python, "-m", "kernelnix", "check-config", str(EXAMPLES / "relu")]
    best, median = best_and_median(lambda: run_quietly(check, env), runs)
    return Figure(
        name="kernelnix check-config in a fresh process (examples/relu)",
        seconds=best,
        baseline="python -c pass",
        baseline_seconds=bare,
        target=(bare + CHECK_CONFIG_TARGET_S) / bare,
        target_text=f"start-up + {CHECK_CONFIG_TARGET_S * 1000:.0f} ms",
        detail=f"best of {runs}; median {duration(median)}; {beyond_startup(best, bare)}",
    )


def measure(runs: int = 7) -> list[Figure]:
    reference = reference_parser()
    with tempfile.TemporaryDirectory() as tmp:
        make_project(Path(tmp))
        load_config(Path(tmp))  # the validator is built once per process: not timed
        figures = in_process(runs, reference, Path(tmp))
    return [*figures, fresh_process(runs), fresh_check_config(runs)]


if __name__ == "__main__":
    runs_main(measure, 7)
