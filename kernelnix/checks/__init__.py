"""Post-build checks: a variant that passes them loads on any supported machine.

`run_checks(variant_dir, options)` checks one variant directory (the build's
post-build hook); `check_tree(path)` checks every variant of a build tree
(`kernelnix check`). See docs/checks.md for the rules and policies.
"""

from kernelnix.checks.context import CheckOptions
from kernelnix.checks.policy import DEFAULT_POLICY, policy_names
from kernelnix.checks.report import CheckReport, Violation, render_reports, reports_json
from kernelnix.checks.runner import check_tree, discover_variants, run_checks

__all__ = [
    "DEFAULT_POLICY",
    "CheckOptions",
    "CheckReport",
    "Violation",
    "check_tree",
    "discover_variants",
    "policy_names",
    "render_reports",
    "reports_json",
    "run_checks",
]
