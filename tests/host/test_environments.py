"""kernelnix.host.environments: the lock's environments of a variant, and fetching
wheels for `build --local` from a real HTTP server on 127.0.0.1: a hash that does
not match the lock, an interrupted download (resumed with a range request), a
Python the lock has no environment for, and a full disk (a 1 MiB tmpfs)."""

from __future__ import annotations

import base64
import hashlib
import http.server
import os
import shutil
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from paths import EXAMPLE_COPY_IGNORE, EXAMPLES

from kernelnix.core.diagnostics import UserError
from kernelnix.host import environments
from kernelnix.host.environments import (
    LockedWheel,
    fetch_wheel,
    locked_environment,
    locked_python_depends,
    not_locked_reason,
)

WHEEL = b"PK" + bytes(range(256)) * 400  # about 100 kB


@dataclass
class Server:
    url: str
    # Bytes sent before the connection is cut, per request (None: the whole file).
    cut_after: list[int | None] = field(default_factory=list)
    ranges: list[str | None] = field(default_factory=list)


def _handler(server: Server) -> type[http.server.BaseHTTPRequestHandler]:
    class Handler(http.server.BaseHTTPRequestHandler):
        def log_message(self, *args: object) -> None:
            pass

        def do_GET(self) -> None:
            requested = self.headers.get("Range")
            server.ranges.append(requested)
            start = int(requested.removeprefix("bytes=").rstrip("-")) if requested else 0
            body = WHEEL[start:]
            self.send_response(206 if requested else 200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            cut = server.cut_after.pop(0) if server.cut_after else None
            self.wfile.write(body if cut is None else body[:cut])
            self.wfile.flush()
            if cut is not None:
                self.connection.shutdown(2)

    return Handler


@pytest.fixture
def server() -> Iterator[Server]:
    state = Server(url="")
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _handler(state))
    state.url = f"http://127.0.0.1:{httpd.server_address[1]}/demo-1.0-py3-none-any.whl"
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield state
    httpd.shutdown()


@pytest.fixture(autouse=True)
def no_nix_store(monkeypatch: pytest.MonkeyPatch) -> None:
    """The wheels here are not in the Nix store, and must not be put there."""
    monkeypatch.setattr(environments, "store_path", lambda wheel: None)


def sri(data: bytes) -> str:
    return "sha256-" + base64.b64encode(hashlib.sha256(data).digest()).decode()


def wheel(server: Server, content: bytes = WHEEL) -> LockedWheel:
    return LockedWheel("demo-1.0-py3-none-any.whl", server.url, sri(content))


def test_a_wheel_is_fetched_once_and_checked(server: Server, tmp_path: Path) -> None:
    lines: list[str] = []
    path = fetch_wheel(wheel(server), tmp_path, lines.append)
    assert path.read_bytes() == WHEEL
    assert fetch_wheel(wheel(server), tmp_path, lines.append) == path
    assert len(server.ranges) == 1 and lines == [f"+ fetch {server.url}"]


def test_a_hash_that_does_not_match_the_lock_is_refused(server: Server, tmp_path: Path) -> None:
    with pytest.raises(UserError) as raised:
        fetch_wheel(wheel(server, b"other bytes"), tmp_path, print)
    message = raised.value.render()
    assert "has sha256" in message and "but the wheel lock" in message
    assert "kernelnix lock-wheels" in message
    # Nothing is kept that a later build could take for the wheel.
    assert list((tmp_path / "wheels").iterdir()) == []


def test_an_interrupted_download_resumes(server: Server, tmp_path: Path) -> None:
    server.cut_after = [30_000]
    with pytest.raises(UserError) as raised:
        fetch_wheel(wheel(server), tmp_path, print)
    assert "a partial download resumes" in raised.value.render()
    part = tmp_path / "wheels" / "demo-1.0-py3-none-any.whl.part"
    assert part.stat().st_size == 30_000
    assert not (tmp_path / "wheels" / "demo-1.0-py3-none-any.whl").exists()
    path = fetch_wheel(wheel(server), tmp_path, print)
    assert path.read_bytes() == WHEEL
    assert server.ranges == [None, "bytes=30000-"]


def test_a_lock_that_cannot_be_read_is_an_error_with_exit_2(tmp_path: Path) -> None:
    """What a user sees: one error naming the file and the fix, no traceback, exit 2."""
    project = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", project, ignore=EXAMPLE_COPY_IGNORE)
    lock = tmp_path / "lock.json"
    lock.write_text("{not json")
    done = subprocess.run(
        ["kernelnix", "build", "--local", str(project)],
        capture_output=True, text=True, check=False,
        env={**os.environ, "KERNELNIX_WHEEL_LOCK": str(lock)},
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert f"cannot read the wheel lock {lock}" in done.stderr
    assert "KERNELNIX_WHEEL_LOCK" in done.stderr
    assert not (project / "build").exists()


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
        capture_output=True, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {done.stderr.decode().strip()}")
    yield mount
    subprocess.run(["umount", str(mount)], check=False)


def test_a_full_disk_is_a_clear_error(server: Server, small_disk: Path) -> None:
    with pytest.raises(UserError) as raised:
        fetch_wheel(wheel(server), small_disk, print)
    assert "no space left on the device" in raised.value.render()
    assert "KERNELNIX_CACHE" in raised.value.render()
    assert not (small_disk / "wheels" / "demo-1.0-py3-none-any.whl").exists()


@dataclass(frozen=True)
class BuildSet:
    torch: str
    backend: str
    backend_version: str | None
    system: str = "x86_64-linux"
    kind: str = "arch"
    tvm_ffi: str | None = None


def variant(torch: str, backend: str, version: str | None) -> BuildSet:
    return BuildSet(torch, backend, version)


LOCK = {
    "wheels": {
        "torch-2.14.1-cp311.whl": {"url": "https://example.invalid/t.whl", "hash": "sha256-x"},
        "nvcc.whl": {"url": "https://example.invalid/n.whl", "hash": "sha256-y"},
    },
    "environments": {
        "x86_64-linux": {
            "cp311": {
                "2.14-cuda-13": {
                    "torch": "2.14.1+cu130",
                    "wheels": ["torch-2.14.1-cp311.whl"],
                    "toolkit": ["nvcc.whl"],
                }
            }
        }
    },
    "missing": {"x86_64-linux": {"cp311": {"2.14-cuda-12.6": "torch 2.14.1+cu126 is not locked"}}},
    "noarch": {"x86_64-linux": {"cp311": {"cuda": "2.14-cuda-13"}}},
    "python-depends": {
        "x86_64-linux": {
            "cp311": {
                "einops": {"wheels": ["einops.whl", "shared.whl"]},
                "tvm-ffi": {"wheels": ["tvm.whl", "shared.whl"]},
                "helion": {"missing": "no wheel of psutil for cp311 x86_64-linux on PyPI"},
                # Two further releases, the first preferred.
                "dsl": {
                    "wheels": ["dsl-2.whl", "shared.whl"],
                    "alternatives": [["dsl-1.whl", "shared.whl"], ["dsl-0.whl"]],
                },
            }
        }
    },
}
for _name in ("einops.whl", "shared.whl", "tvm.whl", "dsl-2.whl", "dsl-1.whl", "dsl-0.whl"):
    LOCK["wheels"][_name] = {"url": f"https://example.invalid/{_name}", "hash": f"sha256-{_name}"}


def test_a_variant_finds_its_environment_by_build_set() -> None:
    found = locked_environment(variant("2.14", "cuda", "13"), "cp311", LOCK)
    assert found is not None and found.torch == "2.14.1+cu130"
    assert [w.name for w in found.wheels] == ["torch-2.14.1-cp311.whl", "nvcc.whl"]
    assert locked_environment(variant("2.14", "cuda", "12.6"), "cp311", LOCK) is None


def test_why_a_variant_has_no_environment() -> None:
    recorded = not_locked_reason(variant("2.14", "cuda", "12.6"), "cp311", LOCK)
    assert recorded == "torch 2.14.1+cu126 is not locked"
    other_python = not_locked_reason(variant("2.14", "cuda", "13"), "cp39", LOCK)
    assert "no environments for cp39 (this Python)" in other_python
    assert "only for cp311" in other_python
    assert "kernelnix lock-wheels --python cp39" in other_python


def test_a_cuda_noarch_variant_loads_in_the_lock_s_noarch_build_set() -> None:
    cuda = locked_environment(BuildSet("", "cuda", None, kind="noarch"), "cp311", LOCK)
    assert cuda is not None and cuda.key == "2.14-cuda-13"
    assert locked_environment(BuildSet("", "cpu", None, kind="noarch"), "cp311", LOCK) is None


def tvm_ffi(backend: str, version: str | None) -> BuildSet:
    return BuildSet("2.14", backend, version, kind="tvm-ffi", tvm_ffi="0.1")


def test_a_tvm_ffi_variant_builds_against_apache_tvm_ffi_and_its_entry_s_toolkit() -> None:
    cpu = locked_environment(tvm_ffi("cpu", None), "cp311", LOCK)
    assert cpu is not None and (cpu.key, cpu.torch) == ("tvm-ffi-0.1-cpu", "")
    assert [w.name for w in cpu.wheels] == ["tvm.whl", "shared.whl"]
    # No Torch: the CUDA toolkit of the build set of the Torch entry it comes from.
    cuda = locked_environment(tvm_ffi("cuda", "13"), "cp311", LOCK)
    assert cuda is not None and cuda.key == "tvm-ffi-0.1-cuda-13"
    assert [w.name for w in cuda.wheels] == ["tvm.whl", "shared.whl", "nvcc.whl"]


@pytest.mark.parametrize(
    ("backend", "version", "tag", "why"),
    [
        ("rocm", "7.2", "cp311", "tvm-ffi kernels for cpu and cuda only, not rocm yet"),
        ("xpu", "2025.3", "cp311", "tvm-ffi kernels for cpu and cuda only, not xpu yet"),
        ("metal", None, "cp311", "tvm-ffi kernels for cpu and cuda only, not metal yet"),
        ("cuda", "12.6", "cp311", "no 2.14-cuda-12.6 environment for cp311 on x86_64-linux"),
        ("cpu", None, "cp39", "no python-depends 'tvm-ffi' (apache-tvm-ffi) for cp39"),
    ],
)
def test_why_a_tvm_ffi_variant_has_no_environment(
    backend: str, version: str | None, tag: str, why: str
) -> None:
    assert locked_environment(tvm_ffi(backend, version), tag, LOCK) is None
    assert why in not_locked_reason(tvm_ffi(backend, version), tag, LOCK)


def test_python_depends_environment_holds_each_wheel_once() -> None:
    [found] = locked_python_depends(["einops", "tvm-ffi"], "x86_64-linux", "cp311", LOCK)
    assert [w.name for w in found.wheels] == ["einops.whl", "shared.whl", "tvm.whl"]
    assert found.describe() == "python-depends-einops-tvm-ffi"
    assert locked_python_depends([], "x86_64-linux", "cp311", LOCK) == []


def test_a_name_with_several_locked_releases_gives_an_environment_for_each() -> None:
    found = locked_python_depends(["einops", "dsl"], "x86_64-linux", "cp311", LOCK)
    # The preferred releases first, then each further release of `dsl` with
    # einops' one release beside it.
    assert [[w.name for w in e.wheels] for e in found] == [
        ["einops.whl", "shared.whl", "dsl-2.whl"],
        ["einops.whl", "shared.whl", "dsl-1.whl"],
        ["einops.whl", "shared.whl", "dsl-0.whl"],
    ]
    assert [e.describe() for e in found] == [
        "python-depends-dsl-einops",
        "python-depends-dsl-einops-alternative-1",
        "python-depends-dsl-einops-alternative-2",
    ]
    assert len({e.digest for e in found}) == 3


def test_a_python_depends_the_lock_lacks_names_why_and_the_command() -> None:
    with pytest.raises(UserError) as raised:
        locked_python_depends(["einops", "helion", "nki"], "x86_64-linux", "cp311", LOCK)
    helion, nki = raised.value.diagnostics
    assert "python-depends 'helion': the wheel lock" in helion.message
    assert helion.message.endswith("no wheel of psutil for cp311 x86_64-linux on PyPI")
    assert "the lock has no python-depends for cp311 on x86_64-linux" in nki.message
    assert "kernelnix lock-wheels" in (helion.fix or "")
