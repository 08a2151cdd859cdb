"""The Hub that cannot be reached: offline mode, a closed port, no network.

huggingface_hub raises OSError for its own HTTP errors and for offline mode
(HF_HUB_OFFLINE), and its HTTP client (httpx2, or httpx) raises its own errors
for a refused or failed connection. Every command that asks the Hub turns these
into one UserError naming the Hub's address, what could not be done and the fix,
never a traceback; a repository or revision that is not there is the caller's
to say first (huggingface_hub's not-found errors are HTTP errors too).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager

from kernelnix.core.diagnostics import UserError

OFFLINE_VARIABLE = "HF_HUB_OFFLINE"


def network_errors() -> tuple[type[Exception], ...]:
    """OSError (huggingface_hub's HTTP errors, offline mode) and its HTTP client's errors."""
    clients = (sys.modules.get(name) for name in ("httpx2", "httpx"))
    return (OSError, *(client.HTTPError for client in clients if client is not None))


def hub_endpoint() -> str:
    """The Hub's address without asking it (HF_ENDPOINT, else huggingface_hub's)."""
    from huggingface_hub import constants

    return os.environ.get("HF_ENDPOINT") or constants.ENDPOINT


def _offline() -> bool:
    from huggingface_hub import constants

    return bool(constants.HF_HUB_OFFLINE)


def unreachable(what: str, error: BaseException, *, key: str | None = None) -> UserError:
    """One error for a request to the Hub that did not get an answer: `what` the
    command could not do (`resolve kernel-depends`), why, and the fix."""
    if _offline():
        return UserError.single(
            f"cannot {what}: {OFFLINE_VARIABLE} is set, and it needs {hub_endpoint()}",
            key=key,
            fix=f"unset {OFFLINE_VARIABLE} (and reach the Hub) to run it",
        )
    return UserError.single(
        f"cannot {what}: {hub_endpoint()} did not answer ({type(error).__name__}: {error})",
        key=key,
        fix="check the network, and HF_ENDPOINT if you use another Hub",
    )


@contextmanager
def hub_requests(what: str, *, key: str | None = None) -> Iterator[None]:
    """The requests to the Hub inside the block, an unreachable Hub as one UserError."""
    try:
        yield
    except network_errors() as error:
        raise unreachable(what, error, key=key) from error
