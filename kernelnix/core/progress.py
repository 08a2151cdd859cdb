"""The progress of a multi-variant build: one line per variant, its state and time.

On a terminal the lines are redrawn in place (ANSI cursor movement, twice a
second, so the time of the variant being built runs) and each variant's build
output goes to a log file instead, since anything else printed would scroll
the lines away; a failed variant's last log lines are printed when the display
ends. Elsewhere (CI logs, pipes) each change is appended as one line stamped
with the time since the build started, and build output flows as usual:

    [0.0s] torch212-cxx11-cpu-x86_64-linux skipped
    [0.0s] torch213-cxx11-cpu-x86_64-linux building
    [12.3s] torch213-cxx11-cpu-x86_64-linux built
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType
from typing import TextIO

from kernelnix.core.diagnostics import display_path

QUEUED = "queued"
BUILDING = "building"
BUILT = "built"
FAILED = "failed"
SKIPPED = "skipped"

TICK_SECONDS = 0.5
TAIL_LINES = 20
# Used when the terminal's size cannot be read.
DEFAULT_SIZE = os.terminal_size((80, 24))


@dataclass
class _Row:
    state: str = QUEUED
    started: float | None = None
    ended: float | None = None


def terminal_size(stream: TextIO) -> os.terminal_size:
    try:
        size = os.get_terminal_size(stream.fileno())
    except (OSError, ValueError):
        return DEFAULT_SIZE
    # A pseudo-terminal nobody sized (script, some CI runners) reads 0 x 0.
    return size if size.columns and size.lines else DEFAULT_SIZE


class Progress:
    """The display of `names`, written to `stream` (None: shown nowhere).

    A context manager; inside it the build loop calls `skip` and `building`.
    `clock` and `tick` are there for tests.
    """

    def __init__(
        self,
        names: Sequence[str],
        stream: TextIO | None,
        *,
        clock: Callable[[], float] = time.monotonic,
        tick: float = TICK_SECONDS,
    ) -> None:
        self._rows = {name: _Row() for name in names}
        self._stream = stream
        self._clock = clock
        self._tick = tick
        self._start = clock()
        self._width = max(map(len, names), default=0)
        # In place only when every line fits on the screen: the cursor cannot
        # move above its top.
        self.live = (
            stream is not None and stream.isatty() and len(names) < terminal_size(stream).lines
        )
        self._out: TextIO | None = None
        self._drawn = 0
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._ticker = threading.Thread(target=self._tick_loop, daemon=True)
        self._failed_log: Path | None = None

    def __enter__(self) -> Progress:
        if self._stream is not None and self.live:
            self._stream.flush()
            # Our own handle on the terminal: stderr itself goes to the logs.
            self._out = open(os.dup(self._stream.fileno()), "w")
            self._draw()
            self._ticker.start()
        else:
            self._out = self._stream
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        if not self.live or self._out is None:
            return
        self._stop.set()
        self._ticker.join()
        self._draw()
        self._out.close()
        if self._failed_log is not None and self._stream is not None:
            self._stream.write(_tail(self._failed_log))
            self._stream.flush()

    def skip(self, name: str) -> None:
        self._change(name, SKIPPED)

    @contextmanager
    def building(self, name: str, log: Path) -> Iterator[None]:
        """Show `name` building, then built, or failed when the block raises.
        On a terminal, the build's output (child processes too) goes to `log`."""
        self._change(name, BUILDING)
        try:
            with _output_to(log) if self.live else nullcontext():
                yield
        except BaseException:
            self._failed_log = log if self.live else None
            self._change(name, FAILED)
            raise
        self._change(name, BUILT)

    def _change(self, name: str, state: str) -> None:
        with self._lock:
            row = self._rows[name]
            row.state = state
            now = self._clock()
            if state == BUILDING:
                row.started = now
            elif state in (BUILT, FAILED):
                row.ended = now
            if self._out is None:
                return
            if self.live:
                self._draw_locked()
            else:
                self._out.write(f"[{now - self._start:.1f}s] {name} {state}\n")
                self._out.flush()

    def _line(self, name: str, row: _Row, now: float) -> str:
        elapsed = ""
        if row.started is not None:
            elapsed = f"{(now if row.ended is None else row.ended) - row.started:.1f}s"
        return f"{name:<{self._width}}  {row.state:<8}  {elapsed}".rstrip()

    def _draw(self) -> None:
        with self._lock:
            self._draw_locked()

    def _draw_locked(self) -> None:
        assert self._out is not None
        now = self._clock()
        columns = terminal_size(self._out).columns
        # Cut to the screen's width: a wrapped line would break the cursor movement.
        lines = [self._line(name, row, now)[: columns - 1] for name, row in self._rows.items()]
        up = f"\x1b[{self._drawn}A" if self._drawn else ""
        self._out.write(up + "".join(f"\r\x1b[2K{line}\n" for line in lines))
        self._out.flush()
        self._drawn = len(lines)

    def _tick_loop(self) -> None:
        while not self._stop.wait(self._tick):
            self._draw()


def _tail(log: Path) -> str:
    lines = log.read_text(errors="replace").splitlines()[-TAIL_LINES:]
    return "".join(
        [f"the last lines of {display_path(log)}:\n", *(f"  {line}\n" for line in lines)]
    )


@contextmanager
def _output_to(log: Path) -> Iterator[None]:
    """This process's stdout and stderr into `log`: file descriptors 1 and 2,
    so that compilers and other child processes write there too."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    saved = [os.dup(1), os.dup(2)]
    try:
        with log.open("wb") as file:
            os.dup2(file.fileno(), 1)
            os.dup2(file.fileno(), 2)
            yield
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, copy in zip((1, 2), saved, strict=True):
            os.dup2(copy, fd)
            os.close(copy)
