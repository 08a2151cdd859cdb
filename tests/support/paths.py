"""Where things are, for tests and benchmarks: the repository, its examples and test data."""

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
TESTS = ROOT / "tests"
GOLDEN = TESTS / "golden"
