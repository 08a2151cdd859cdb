"""Where things are, for tests and benchmarks: the repository, its examples and test data."""

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TESTS = ROOT / "tests"
GOLDEN = TESTS / "golden"
# A kernel's build outputs, left out of every copy of it: a `build --local` tree
# holds `project/kernel`, a copy of the kernel's sources (a link back to the
# kernel folder in older trees, which a copy that follows links would copy into
# itself until paths grow too long).
BUILD_OUTPUTS = shutil.ignore_patterns("build", "result", "__pycache__")
# A copy of an example for a project of its own: without build outputs, and
# without the example's flake (examples/fused-scale's names this checkout by a
# relative path, which a copy elsewhere cannot follow).
EXAMPLE_COPY_IGNORE = shutil.ignore_patterns(
    "build", "result", "__pycache__", "flake.nix", "flake.lock", ".gitignore"
)
