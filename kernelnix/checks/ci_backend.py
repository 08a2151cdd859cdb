"""A pytest plugin of ci-test (`-p kernelnix.checks.ci_backend`): the `kernels`
loader in the kernel's own tests asks for the variant's backend.

ci-test runs a variant's tests in that variant's environment, its locked Torch.
PyPI has no CPU wheel of Torch, so kernelnix builds CPU variants against the
CUDA wheel of their release, in which the loader looks for a CUDA variant: a
test's `kernels.get_kernel(...)` would find no variant in the CPU variant's
directory. Users of a CUDA Torch load a CPU variant by asking for it
(`backend="cpu"`), as the build's import check does; with KERNELNIX_CI_BACKEND
set, this plugin makes the loader ask for that backend whenever a test leaves
it to the loader. Without it, the plugin changes nothing.
"""

from __future__ import annotations

import importlib
import os
from typing import Any

BACKEND_VARIABLE = "KERNELNIX_CI_BACKEND"


def pytest_configure(config: Any) -> None:
    backend = os.environ.get(BACKEND_VARIABLE)
    if not backend:
        return
    # The loader is the test Python's, not a dependency of kernelnix.
    backends: Any = importlib.import_module("kernels.backends")
    chosen = backends._select_backend(backend)
    # The loader's own choice when a caller names no backend (kernels 0.17).
    backends._backend = lambda: chosen
