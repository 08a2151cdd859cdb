"""A CUDA kernel built with `-lineinfo` and a device assert (tests/compile/data/lineinfo)
through its flake, with the hermetic toolchain in the sandbox: the build succeeds
(the variant derivation refuses any store reference) and its library names neither
a store path nor the sandbox's build folder. Heavy: the CUDA variant compiles cold.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from nix_projects import kernelnix_clone, make_project, nix
from paths import ROOT

LINEINFO = ROOT / "tests" / "compile" / "data" / "lineinfo"
CUDA = "torch213-cxx11-cu130-x86_64-linux"

pytestmark = [
    pytest.mark.heavy,
    pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix"),
]


def test_device_code_of_a_flake_build_holds_no_store_or_build_path(tmp_path: Path) -> None:
    url, env = kernelnix_clone(tmp_path, ("2.13-cuda-13",))
    options = ("--toolchain", "hermetic", "--no-host-record")
    project = make_project(LINEINFO, tmp_path / "lineinfo", url, env, options)
    nix(
        project, env, "build", f".#{CUDA}", "-o", str(project / "result"),
        "--option", "sandbox", "true", "--cores", "1", "--max-jobs", "1",
    )  # fmt: skip
    (library,) = (project / "result" / CUDA).glob("*.so")
    data = library.read_bytes()
    assert [p for p in (b"/nix/store/", b"/build/", str(tmp_path).encode()) if p in data] == []
    for neutral in (b"/kernelnix/work/project/kernel/lineinfo", b"/kernelnix/site/torch/include"):
        assert neutral in data
    # The assert's message, then its function and file: relative as nvcc got it, or
    # the work directory's neutral name.
    message = data.index(b"i < n\x00")
    assert re.search(rb"\x00(\.\./|/kernelnix/work/)project/kernel/lineinfo/scale\.cu\x00",
                     data[message : message + 200])  # fmt: skip
