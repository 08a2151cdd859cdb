"""kernelnix.publish.archive: which derivations of a build are its downloads (the
shape `nix show-derivation --recursive` prints), which come from PyPI, and the
cache names `--to`/`--archive` take. tests/e2e/test_reproduce.py archives a real
bundle's downloads into a folder and an HTTP server and builds from them."""

from __future__ import annotations

from pathlib import Path

from kernelnix.commands.nix import archive_url
from kernelnix.publish.archive import Download, downloads


def derivation(output: str, url: str | None, fixed: bool) -> dict[str, object]:
    out: dict[str, str] = {"path": output}
    if fixed:
        out |= {"hashAlgo": "sha256", "hash": "00" * 32}
    env = {"name": Path(output).name} | ({"url": url} if url else {})
    return {"outputs": {"out": out}, "env": env, "inputDrvs": {}}


def test_the_downloads_are_the_fixed_output_derivations() -> None:
    deb = "http://deb.debian.org/debian/pool/main/u/util-linux/libuuid1.deb"
    wheel = "https://files.pythonhosted.org/packages/aa/torch-2.13.0.whl"
    shown = {
        "/nix/store/a-libuuid1.deb.drv": derivation("/nix/store/a-libuuid1.deb", deb, True),
        "/nix/store/b-torch.whl.drv": derivation("/nix/store/b-torch.whl", wheel, True),
        "/nix/store/c-gcc-12.drv": derivation("/nix/store/c-gcc-12", None, False),
    }
    found = downloads(shown)
    assert found == [
        Download("/nix/store/a-libuuid1.deb.drv", "/nix/store/a-libuuid1.deb", deb),
        Download("/nix/store/b-torch.whl.drv", "/nix/store/b-torch.whl", wheel),
    ]
    assert [d.from_pypi for d in found] == [False, True]


def test_a_folder_is_a_file_cache_and_a_url_stays(tmp_path: Path) -> None:
    assert archive_url(str(tmp_path / "archive")) == f"file://{tmp_path / 'archive'}"
    assert archive_url("http://127.0.0.1:8080/cache") == "http://127.0.0.1:8080/cache"
    assert archive_url("file:///srv/a?compression=none") == "file:///srv/a?compression=none"
