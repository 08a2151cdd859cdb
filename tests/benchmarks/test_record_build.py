"""benchmarks/record_build.py: a full build's object times, read from the
progress lines `kernelnix build` printed."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from paths import ROOT

sys.path.insert(0, str(ROOT / "benchmarks"))

from record_build import object_seconds


def test_a_build_s_progress_lines_give_each_object_s_seconds_the_last_run_winning() -> None:
    log = [
        "building '/nix/store/x-a.cu.o.drv'",
        "[1/3] a/flash_bwd_hdim64_fp16_sm80.cu (8.0 9.0) 300 s",
        "[2/3] a/flash_api.cpp (torch-stable-abi210-cu130-x86_64-linux) 9 s on ssh-ng://b1",
        "kernelnix: 1 objects to build, on this machine",
        "[1/1] a/flash_bwd_hdim64_fp16_sm80.cu (8.0 9.0) 280 s",
    ]
    assert object_seconds(log) == {
        "a/flash_api.cpp": 9.0,
        "a/flash_bwd_hdim64_fp16_sm80.cu": 280.0,
    }


def test_a_retimed_object_that_is_not_in_the_logs_or_not_seconds_is_refused(
    tmp_path: Path,
) -> None:
    log = tmp_path / "build.log"
    log.write_text("[1/1] a/x.cu (9.0) 300 s\n")
    script = ROOT / "benchmarks" / "record_build.py"
    for retimed, said in (
        ("a/y.cu=10", "no object a/y.cu in the logs"),
        ("a/x.cu=ten", "SECONDS must be a number"),
    ):
        done = subprocess.run(
            [sys.executable, script, "k", log, "--how", "h", "--retimed", retimed],
            capture_output=True,
            text=True,
            check=False,
        )
        assert done.returncode == 2
        assert said in done.stderr
        assert "Traceback" not in done.stderr
