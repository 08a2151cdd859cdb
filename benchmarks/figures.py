"""What every benchmark returns: a time as a ratio against a baseline timed in
the same run (so that figures from a busy or a fast machine compare), and the
largest ratio its target allows."""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass


class Unavailable(Exception):
    """A benchmark that cannot run on this machine; the message says what it needs."""


@dataclass(frozen=True)
class Figure:
    name: str
    seconds: float
    baseline: str
    baseline_seconds: float
    target: float | None  # the largest ratio that passes; None: measured, not judged
    target_text: str  # the target as docs/performance.md states it
    detail: str = ""

    @property
    def ratio(self) -> float:
        return self.seconds / self.baseline_seconds

    @property
    def verdict(self) -> str:
        """PASS or MISS against the target; INFO for a figure without one."""
        if self.target is None:
            return "INFO"
        return "PASS" if self.ratio <= self.target else "MISS"

    @property
    def target_bound(self) -> str:
        return "no target" if self.target is None else f"target <= {ratio_text(self.target)} x"

    def lines(self) -> list[str]:
        return [
            f"{self.verdict}  {self.name}",
            f"      {duration(self.seconds)} = {ratio_text(self.ratio)} x {self.baseline} "
            f"({duration(self.baseline_seconds)}); {self.target_bound}: {self.target_text}",
            *([f"      {self.detail}"] if self.detail else []),
        ]


def duration(seconds: float) -> str:
    if seconds >= 1:
        return f"{seconds:.2f} s"
    return f"{seconds * 1e3:.1f} ms" if seconds >= 1e-3 else f"{seconds * 1e6:.0f} µs"


def beyond_startup(seconds: float, bare: float) -> str:
    """A fresh process's time past the bare interpreter's (`python -c pass`)."""
    return f"{duration(seconds - bare)} beyond start-up"


def ratio_text(ratio: float) -> str:
    return f"{ratio:.3f}" if ratio >= 0.01 else f"{ratio:.1e}"


def report(figures: Sequence[Figure]) -> None:
    for figure in figures:
        print("\n".join(figure.lines()), flush=True)


def runs_main(measure: Callable[[int], Sequence[Figure]], runs: int) -> None:
    """The command line of a benchmark whose one option is `--runs N`."""
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=runs)
    report(measure(parser.parse_args().runs))


def timed(action: Callable[[], object]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def python_env() -> dict[str, str]:
    """The environment of a timed Python process, bytecode caching on: with
    PYTHONDONTWRITEBYTECODE every run would compile kernelnix's modules afresh,
    which no installed kernelnix does."""
    return {key: value for key, value in os.environ.items() if key != "PYTHONDONTWRITEBYTECODE"}


def run_quietly(command: Sequence[str], env: Mapping[str, str] | None = None) -> None:
    subprocess.run(list(command), check=True, capture_output=True, env=env)


def best_and_median(action: Callable[[], object], runs: int) -> tuple[float, float]:
    times = [timed(action) for _ in range(runs)]
    return min(times), statistics.median(times)


@contextmanager
def environment_set(**values: str) -> Iterator[None]:
    """`os.environ` with `values` set for the block, as it was afterwards: a benchmark
    run by benchmarks/run shares the process with the ones after it."""
    before = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in before.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
