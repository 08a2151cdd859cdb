"""The host record's identity: what it holds, and the builder's check of it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from paths import ROOT

from kernelnix.host.identity import check, compiler_version, mismatches, record_identity
from kernelnix.host.record import TOOLS


def test_the_identity_names_the_recorded_compilers_the_c_library_and_torch() -> None:
    tools = {name: "/unused" for name in ("g++", "cmake", "ninja")}
    identity = record_identity(tools)
    assert set(identity["compilers"]) == {"g++"}  # cmake and ninja compile nothing
    assert identity["compilers"]["g++"].startswith("g++ ")
    assert identity["c-library"].startswith("glibc ")
    assert identity["python"].startswith("cpython 3.")
    assert identity["torch"]  # this machine's Python has Torch
    assert set(TOOLS) >= set(identity["compilers"])


def test_a_version_is_the_lines_that_say_it(tmp_path: Path) -> None:
    fake = tmp_path / "nvcc"
    fake.write_text(
        "#!/bin/sh\necho 'nvcc: NVIDIA (R) Cuda compiler driver'\n"
        "echo 'Copyright (c) 2005-2025 NVIDIA Corporation'\n"
        "echo 'Cuda compilation tools, release 13.0, V13.0.88'\n"
    )
    fake.chmod(0o755)
    assert compiler_version(str(fake)) == "Cuda compilation tools, release 13.0, V13.0.88"
    assert compiler_version(str(tmp_path / "missing")).startswith("cannot run")


def test_this_machine_agrees_with_its_own_identity() -> None:
    assert check(record_identity({"g++": "/usr/bin/g++"})) == []


def test_each_difference_is_one_line() -> None:
    recorded = {"c-library": "glibc 2.36", "compilers": {"g++": "g++ 12", "nvcc": "13.0"}}
    found = {"c-library": "glibc 2.36", "compilers": {"g++": "g++ 14", "nvcc": "13.0"}}
    assert mismatches(recorded, found) == [
        'compilers.g++: recorded "g++ 12", this machine has "g++ 14"'
    ]
    assert mismatches(recorded, recorded) == []


@pytest.mark.parametrize("same", [True, False])
def test_the_builders_check_exits_1_with_what_differs(same: bool) -> None:
    identity = record_identity({"g++": "/usr/bin/g++"})
    if not same:
        identity["compilers"]["g++"] = "g++ (Other) 99.1.0"
    done = subprocess.run(
        [sys.executable, "-B", "-m", "kernelnix.host.identity", json.dumps(identity)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert done.returncode == (0 if same else 1)
    if not same:
        assert 'compilers.g++: recorded "g++ (Other) 99.1.0"' in done.stderr
        assert "run `kernelnix generate`" in done.stderr
        assert "Traceback" not in done.stderr
