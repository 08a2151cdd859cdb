"""Post-build checks: a variant that passes them loads on any supported machine.

`run_checks(variant_dir, options)` checks one variant directory (the build's
post-build hook); `check_tree(path)` checks every variant of a build tree
(`kernelnix check`). See docs/checks.md for the rules and policies.

The names below are imported on first use: a module that needs one part (host
detection: the policies) does not load every rule with this package.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from kernelnix.checks.context import CheckOptions
    from kernelnix.checks.import_check import ImportChild
    from kernelnix.checks.policy import DEFAULT_POLICY, policy_names
    from kernelnix.checks.report import CheckReport, Violation, render_reports, reports_json
    from kernelnix.checks.runner import check_tree, discover_variants, run_checks

# Name -> the module of this package that defines it.
_EXPORTS = {
    "CheckOptions": "context",
    "ImportChild": "import_check",
    "DEFAULT_POLICY": "policy",
    "policy_names": "policy",
    "CheckReport": "report",
    "Violation": "report",
    "render_reports": "report",
    "reports_json": "report",
    "check_tree": "runner",
    "discover_variants": "runner",
    "run_checks": "runner",
}

__all__ = [
    "DEFAULT_POLICY",
    "CheckOptions",
    "CheckReport",
    "ImportChild",
    "Violation",
    "check_tree",
    "discover_variants",
    "policy_names",
    "render_reports",
    "reports_json",
    "run_checks",
]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
