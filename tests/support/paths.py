"""Where things are, for tests and benchmarks: the repository, its examples and test data."""

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TESTS = ROOT / "tests"
GOLDEN = TESTS / "golden"
# A copy of an example for a project of its own: without build outputs, and
# without the example's flake (examples/fused-scale's names this checkout by a
# relative path, which a copy elsewhere cannot follow).
EXAMPLE_COPY_IGNORE = shutil.ignore_patterns(
    "build", "result", "__pycache__", "flake.nix", "flake.lock", ".gitignore"
)
