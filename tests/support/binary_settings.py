"""The binary rules' settings (kernelnix.checks.binaries) for tests that check a
library they built: a redistributable x86_64-linux CPU variant."""

from __future__ import annotations

from kernelnix.checks.binaries import BinarySettings
from kernelnix.checks.policy import load_policy
from kernelnix.core.version import Version


def kernel_policy(kind: str | None = None) -> BinarySettings:
    """Under the default (`kernel`) policy, for a variant of `kind` (None: from no name)."""
    return BinarySettings(
        policy=load_policy("kernel", "x86_64"),
        python_abi=Version.parse("3.9"),
        stable_abi=None,
        macos_min=Version.parse("15.0"),
        backend="cpu",
        cpu="x86_64",
        os_name="linux",
        redistributable=True,
        kind=kind,
    )
