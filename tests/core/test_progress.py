"""The progress display of multi-variant builds: exact output on a terminal and
in a log (fake clock), the build output redirected to logs on a terminal, and
real `kernelnix build --local` runs with stderr on a pipe and on a pseudo-terminal."""

from __future__ import annotations

import io
import os
import pty
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from paths import EXAMPLES

from kernelnix.cli import main
from kernelnix.core.progress import DEFAULT_SIZE, Progress, terminal_size

NOARCH = ["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]
UP = "\x1b[2A"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


class Terminal(io.TextIOWrapper):
    """A file that says it is a terminal: holds what the display wrote, byte for byte."""

    def isatty(self) -> bool:
        return True


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def screen(tmp_path: Path) -> Terminal:
    # Append mode: the display writes through its own descriptor of the same file.
    return Terminal(open(tmp_path / "screen", "ab"), write_through=True)


def drawn(screen: Terminal) -> str:
    return Path(screen.name).read_bytes().decode()


def block(*lines: str, up: bool = True) -> str:
    return (UP if up else "") + "".join(f"\r\x1b[2K{line}\n" for line in lines)


def test_lines_in_a_log_are_stamped_with_the_time_since_the_start(clock: Clock) -> None:
    log = io.StringIO()
    with Progress(["a", "bb", "c"], log, clock=clock) as progress:
        progress.skip("c")
        clock.now = 1.0
        with progress.building("a", Path("unused.log")):
            clock.now = 2.5
        with pytest.raises(RuntimeError), progress.building("bb", Path("unused.log")):
            clock.now = 12.34
            raise RuntimeError("compiler error")
    assert not progress.live
    assert log.getvalue() == (
        "[0.0s] c skipped\n"
        "[1.0s] a building\n"
        "[2.5s] a built\n"
        "[2.5s] bb building\n"
        "[12.3s] bb failed\n"
    )
    assert not Path("unused.log").exists()


def test_a_terminal_is_redrawn_in_place(
    clock: Clock, screen: Terminal, tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    with Progress(["a", "bb"], screen, clock=clock, tick=3600) as progress:
        assert progress.live
        progress.skip("bb")
        clock.now = 1.0
        with progress.building("a", tmp_path / "logs" / "a.log"):
            clock.now = 3.5
            # What the build prints, child processes included, goes to the log.
            subprocess.run(["sh", "-c", "echo compiling; echo warning >&2"], check=True)
        subprocess.run(["echo", "after"], check=True)
    assert drawn(screen) == (
        block("a   queued", "bb  queued", up=False)
        + block("a   queued", "bb  skipped")
        + block("a   building  0.0s", "bb  skipped")
        + block("a   built     2.5s", "bb  skipped")
        + block("a   built     2.5s", "bb  skipped")
    )
    assert (tmp_path / "logs" / "a.log").read_text() == "compiling\nwarning\n"
    assert capfd.readouterr().out == "after\n"


def test_a_failure_on_a_terminal_shows_the_end_of_its_log(
    clock: Clock, screen: Terminal, tmp_path: Path
) -> None:
    log = tmp_path / "a.log"
    with (
        pytest.raises(subprocess.CalledProcessError),
        Progress(["a", "b"], screen, clock=clock, tick=3600) as progress,
        progress.building("a", log),
    ):
        clock.now = 2.0
        script = "seq 1 30; echo 'error: broken' >&2; exit 1"
        subprocess.run(["sh", "-c", script], check=True)
    tail = "".join(f"  {n}\n" for n in range(12, 31))
    assert drawn(screen) == (
        block("a  queued", "b  queued", up=False)
        + block("a  building  0.0s", "b  queued")
        + block("a  failed    2.0s", "b  queued")
        + block("a  failed    2.0s", "b  queued")
        + f"the last lines of {log}:\n{tail}  error: broken\n"
    )


def test_the_time_of_a_building_variant_runs(clock: Clock, screen: Terminal) -> None:
    log = Path(screen.name).with_suffix(".log")
    with (
        Progress(["a", "b"], screen, clock=clock, tick=0.01) as progress,
        progress.building("a", log),
    ):
        clock.now = 7.0
        deadline = time.monotonic() + 10
        while "a  building  7.0s" not in drawn(screen) and time.monotonic() < deadline:
            time.sleep(0.01)
    assert "a  building  7.0s" in drawn(screen)


def test_more_variants_than_the_screen_has_lines_are_appended(
    clock: Clock, screen: Terminal
) -> None:
    names = [f"v{n}" for n in range(DEFAULT_SIZE.lines)]
    with Progress(names, screen, clock=clock) as progress:
        progress.skip("v0")
    assert not progress.live
    assert drawn(screen) == "[0.0s] v0 skipped\n"


def test_no_stream_shows_nothing(tmp_path: Path) -> None:
    with Progress(["a", "b"], None) as progress, progress.building("a", tmp_path / "a.log"):
        progress.skip("b")
    assert not progress.live
    assert list(tmp_path.iterdir()) == []


def test_an_unsized_pseudo_terminal_counts_as_80_by_24() -> None:
    leader, follower = pty.openpty()
    with open(follower, "w") as stream, open(leader, "rb"):
        assert stream.isatty()
        assert terminal_size(stream) == DEFAULT_SIZE


def rocm_only_kernel(root: Path) -> Path:
    """A kernel whose every variant this machine skips (no ROCm Torch here)."""
    kernel = root / "rocm-only"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("build"))
    config = kernel / "build.toml"
    config.write_text(re.sub(r"(?m)^backends = .*$", 'backends = ["rocm"]', config.read_text()))
    return kernel


@pytest.mark.parametrize(("flags", "shown"), [([], True), (["--no-progress"], False)])
def test_build_local_shows_skipped_variants(tmp_path: Path, flags: list[str], shown: bool) -> None:
    result = CliRunner().invoke(main, ["build", "--local", str(rocm_only_kernel(tmp_path)), *flags])
    assert result.exit_code == 2, result.output
    assert ("[0.0s] torch213-cxx11-rocm72-x86_64-linux skipped" in result.stderr) is shown
    assert "skipped torch213-cxx11-rocm72-x86_64-linux: needs a Torch built for rocm" in (
        result.stdout
    )


def test_config_warnings_come_before_the_build(tmp_path: Path) -> None:
    kernel = rocm_only_kernel(tmp_path)
    config = kernel / "build.toml"
    config.write_text(config.read_text().replace("edition = 5\n", ""))  # a v4 file
    result = CliRunner().invoke(main, ["build", "--local", str(kernel)])
    assert result.exit_code == 2, result.output
    warning = result.stderr.index("kernelnix update-build")
    assert warning < result.stderr.index("[0.0s] torch213-cxx11-rocm72-x86_64-linux skipped")


def noarch_kernel(root: Path) -> Path:
    kernel = root / "relu-noarch"
    shutil.copytree(EXAMPLES / "relu-noarch", kernel, ignore=shutil.ignore_patterns("build"))
    return kernel


KERNELNIX = [sys.executable, "-m", "kernelnix"]


@pytest.mark.slow
def test_build_local_appends_progress_lines_to_a_log(tmp_path: Path) -> None:
    kernel = noarch_kernel(tmp_path)
    done = subprocess.run(
        [*KERNELNIX, "build", "--local", str(kernel)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    stamped = re.findall(r"(?m)^\[\d+\.\ds\] (\S+ \w+)$", done.stderr)
    assert stamped == [f"{name} {state}" for name in NOARCH for state in ("building", "built")]
    assert "ok    torch-cpu: no violations" in done.stdout
    assert not (kernel / "build" / ".build").exists()


def read_until_closed(fd: int) -> str:
    chunks = []
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:  # EIO: the other side is closed
            break
        if not chunk:
            break
        chunks.append(chunk)
    return b"".join(chunks).decode()


@pytest.mark.slow
def test_build_local_on_a_terminal_redraws_and_logs(tmp_path: Path) -> None:
    kernel = noarch_kernel(tmp_path)
    leader, follower = pty.openpty()
    process = subprocess.Popen(
        [*KERNELNIX, "build", "--local", str(kernel)], stdout=subprocess.PIPE, stderr=follower
    )
    os.close(follower)
    screen = read_until_closed(leader)
    os.close(leader)
    stdout = process.communicate()[0].decode()
    assert process.returncode == 0, screen
    final = screen.rsplit("\x1b[4A", 1)[1]
    for name in NOARCH:
        assert re.search(rf"{name} +built +\d+\.\ds", final), final
        assert "no violations" in (kernel / "build" / ".build" / f"{name}.log").read_text()
    assert "no violations" not in screen + stdout
    assert stdout.splitlines() == [f"built {kernel / 'build' / name}" for name in NOARCH]
