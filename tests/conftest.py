"""Shared test fixtures: golden files, the examples, offline Hub settings."""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
from paths import GOLDEN
from store_room import StoreRoom
from wheel_locks import lock_with

os.environ.setdefault("HF_HUB_OFFLINE", "1")
STORE_ROOM = pytest.StashKey[StoreRoom]()


@pytest.fixture(scope="session", autouse=True)
def _no_locked_wheels(tmp_path_factory: pytest.TempPathFactory) -> None:
    """Builds use the build Python's Torch unless a test locks wheels for them
    (tests/support/wheel_locks.py: the whole lock fetches gigabytes)."""
    os.environ["KERNELNIX_WHEEL_LOCK"] = str(
        lock_with(tmp_path_factory.mktemp("lock") / "wheel-lock.json")
    )


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--update-golden",
        action="store_true",
        help="rewrite golden files from the current output instead of comparing",
    )
    parser.addoption(
        "--heavy",
        action="store_true",
        help="also run the tests marked heavy: whole bundles from every locked wheel and "
        "large kernels compiled cold (gigabytes, an hour or more)",
    )
    parser.addoption(
        "--nix-gc-below",
        type=float,
        metavar="GB",
        help="after a test module, collect the Nix store's garbage when less than GB "
        "gigabytes are free (tests/support/store_room.py)",
    )


def pytest_configure(config: pytest.Config) -> None:
    config.stash[STORE_ROOM] = StoreRoom(config.getoption("--nix-gc-below"))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> object:
    # After the hook, the module's fixtures are gone when the next test is in
    # another module: what they built is garbage unless a result link roots it.
    result = yield
    if nextitem is None or nextitem.path != item.path:
        item.config.stash[STORE_ROOM].after_module(item.nodeid.split("::")[0])
    return result


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    for line in config.stash[STORE_ROOM].summary():
        terminalreporter.write_line(line)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if config.getoption("--heavy"):
        return
    skip = pytest.mark.skip(reason="heavy: run with pytest --heavy")
    for item in items:
        if "heavy" in item.keywords:
            item.add_marker(skip)


@pytest.fixture
def golden(request: pytest.FixtureRequest) -> Callable[[str, str], None]:
    """`golden("emit/relu.nix", text)`: compare text with tests/golden/<name>.

    Golden files change only with `pytest --update-golden`.
    """
    update = request.config.getoption("--update-golden")

    def check(name: str, text: str) -> None:
        path = GOLDEN / name
        if update:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            return
        assert path.exists(), f"missing golden file {path}; run pytest --update-golden"
        assert text == path.read_text(), f"output differs from {path}; see the diff above"

    return check
