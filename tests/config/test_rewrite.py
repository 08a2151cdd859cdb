"""`kernelnix update-build`: pre-edition files rewritten as edition 5, comments kept."""

from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner, Result
from paths import ROOT, TESTS

from kernelnix.cli import main
from kernelnix.config import load_config
from kernelnix.config.rewrite import plan_update

GOOD = TESTS / "data" / "configs" / "good"
CORPUS = sorted(p.parent for p in GOOD.glob("*/build.toml")) + sorted(
    p.parent for p in (ROOT / "examples").glob("*/build.toml")
)

V4 = """\
# relu: a pre-edition (v4) build.toml
[general]
name = "relu"  # the kernel's name
version = 1
license = "Apache-2.0"
backends = ["cuda", "rocm"]  # two backends

[general.hub]
repo-id = "org/relu"

# The Torch extension
[torch]
src = ["torch-ext/torch_binding.cpp", "torch-ext/torch_binding.h"]
stable-abi = "2.11"

[kernel.relu]
backend = "cuda"
depends = ["torch"]
src = ["relu_cuda/relu.cu"]
cuda-capabilities = ["8.0", "9.0"]  # Ampere, Hopper
"""

V3 = """\
# A v3 file: no version, no framework section.
[general]
name = "relu"
license = "MIT"
backends = ["cpu"]

[kernel.relu]
backend = "cpu"
depends = []
src = ["relu.cpp"]
"""


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


@pytest.fixture
def kernel(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty kernel directory `k`, relative to the cwd (a temp dir)."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "k").mkdir()
    return Path("k")


def write(directory: Path, text: str) -> Path:
    path = directory / "build.toml"
    path.write_bytes(text.encode())
    return path


def files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def keys_in_order(text: str) -> list[str]:
    """Table headers and keys, in file order."""
    return re.findall(r"^\s*(\[[^\]]+\]|[A-Za-z0-9_-]+)\s*=?", text, flags=re.MULTILINE)


def comments(text: str) -> list[str]:
    return re.findall(r"#.*$", text, flags=re.MULTILINE)


def assert_clean_exit(result: Result, code: int) -> None:
    assert result.exit_code == code, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output


def test_v4_gets_edition_and_keeps_comments_and_order(runner: CliRunner, kernel: Path) -> None:
    path = write(kernel, V4)
    before = load_config(kernel).config
    result = runner.invoke(main, ["update-build", str(kernel)])
    assert_clean_exit(result, 0)
    assert result.stdout == "k/build.toml: upgraded from the pre-edition v4 format to edition 5\n"
    new = path.read_text()
    # One line added at the end of [general], nothing else touched.
    assert new == V4.replace(
        'backends = ["cuda", "rocm"]  # two backends\n',
        'backends = ["cuda", "rocm"]  # two backends\nedition = 5\n',
    )
    assert comments(new) == comments(V4)
    assert [k for k in keys_in_order(new) if k != "edition"] == keys_in_order(V4)
    loaded = load_config(kernel)
    assert (loaded.shape, loaded.warnings) == ("5", [])
    assert loaded.config == before
    assert files(kernel) == {"build.toml": new.encode()}  # no temp file left behind


def test_v3_gets_version_edition_and_a_noarch_section(runner: CliRunner, kernel: Path) -> None:
    path = write(kernel, V3)
    before = load_config(kernel)
    assert before.shape == "v3"
    result = runner.invoke(main, ["update-build", str(kernel)])
    assert_clean_exit(result, 0)
    assert "from the pre-edition v3 format" in result.stdout
    new = path.read_text()
    assert new.startswith(V3.split("\n\n")[0] + "\nversion = 1\nedition = 5\n\n")
    assert new.endswith("\n[torch-noarch]\n")
    assert comments(new) == comments(V3)
    loaded = load_config(kernel)
    assert loaded.shape == "5"
    assert loaded.config == before.config
    assert loaded.config.framework == "torch-noarch"


def test_v3_with_a_framework_gets_no_noarch_section(kernel: Path) -> None:
    text = V3.replace("\n[kernel.relu]", '\n[torch]\nsrc = ["b.cpp"]\n\n[kernel.relu]')
    write(kernel, text)
    update = plan_update(kernel)
    assert update.shape == "v3"
    changes = [line for line in update.diff().splitlines()[2:] if line[:1] in "+-"]
    assert changes == ["+version = 1", "+edition = 5"]


def test_dry_run_prints_a_diff_and_writes_nothing(runner: CliRunner, kernel: Path) -> None:
    write(kernel, V4)
    before = files(kernel)
    result = runner.invoke(main, ["update-build", "--dry-run", str(kernel)])
    assert_clean_exit(result, 0)
    assert result.stdout.startswith("--- a/k/build.toml\n+++ b/k/build.toml\n@@ ")
    changes = [line for line in result.stdout.splitlines()[2:] if line[:1] in "+-"]
    assert changes == ["+edition = 5"]
    assert files(kernel) == before


def test_edition5_is_left_untouched(runner: CliRunner, kernel: Path) -> None:
    path = write(kernel, V4.replace("version = 1\n", "version = 1\nedition = 5\n"))
    before = files(kernel)
    stamp = path.stat().st_mtime_ns
    for args in (["update-build", str(kernel)], ["update-build", "--dry-run", str(kernel)]):
        result = runner.invoke(main, args)
        assert_clean_exit(result, 0)
        assert result.stdout == "k/build.toml: already edition 5; nothing to do\n"
    assert files(kernel) == before
    assert path.stat().st_mtime_ns == stamp


def test_crlf_line_endings_are_kept(kernel: Path) -> None:
    path = write(kernel, V4.replace("\n", "\r\n"))
    update = plan_update(kernel)
    assert "\r\nedition = 5\r\n" in update.new_text
    assert "\n" not in update.new_text.replace("\r\n", "")
    assert update.new_text.replace("edition = 5\r\n", "") == path.read_bytes().decode()


def test_file_mode_is_kept(runner: CliRunner, kernel: Path) -> None:
    path = write(kernel, V4)
    path.chmod(0o640)
    assert_clean_exit(runner.invoke(main, ["update-build", str(kernel)]), 0)
    assert path.stat().st_mode & 0o777 == 0o640


def test_a_failed_write_leaves_the_file_intact(
    runner: CliRunner, kernel: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write(kernel, V4)
    before = files(kernel)

    def fail(src: object, dst: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", fail)
    result = runner.invoke(main, ["update-build", str(kernel)])
    assert_clean_exit(result, 2)
    assert "error: k/build.toml: cannot write build.toml: No space left on device" in result.stderr
    assert files(kernel) == before  # the original, and no temp file


def test_bad_input_is_reported_and_nothing_written(runner: CliRunner, kernel: Path) -> None:
    write(kernel, V4.replace('license = "Apache-2.0"\n', ""))
    before = files(kernel)
    result = runner.invoke(main, ["update-build", str(kernel)])
    assert_clean_exit(result, 2)
    assert "k/build.toml:2: general.license: required key `license` is missing" in result.stderr
    assert files(kernel) == before


def test_v3_without_license_says_what_to_add(runner: CliRunner, kernel: Path) -> None:
    write(kernel, V3.replace('license = "MIT"\n', ""))
    result = runner.invoke(main, ["update-build", str(kernel)])
    assert_clean_exit(result, 2)
    assert "no `license`" in result.stderr
    assert 'add `license = "Apache-2.0"`' in result.stderr


@pytest.mark.parametrize("source", CORPUS, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_accepted_file_upgrades_to_the_same_config(
    source: Path, runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    shutil.copy(source / "build.toml", tmp_path / "build.toml")
    old = (tmp_path / "build.toml").read_bytes()
    before = load_config(tmp_path)
    assert_clean_exit(runner.invoke(main, ["update-build"]), 0)
    new = (tmp_path / "build.toml").read_bytes()
    after = load_config(tmp_path)
    assert after.shape == "5"
    assert after.config == before.config
    assert [p.name for p in tmp_path.iterdir()] == ["build.toml"]
    if before.shape == "5":
        assert new == old
        return
    assert comments(new.decode()) == comments(old.decode())
    # The reference parser reads the upgraded file as edition 5 too.
    reference = pytest.importorskip("kernels._rust")
    if "cuda-capabilities" in new.decode() and before.config.torch_noarch is not None:
        return  # kebab-case noarch keys: a kernelnix extension (docs/build-toml.md)
    build = reference.Build.open(str(tmp_path))
    assert [str(b) for b in build.general.backends] == after.config.general.backends
