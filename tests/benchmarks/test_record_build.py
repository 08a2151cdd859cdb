"""benchmarks/record_build.py: a full build's object times, read from the
progress lines `kernelnix build` printed."""

from __future__ import annotations

import sys

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
