"""Incremental `nix build` with the opt-in compiler cache (docs/distributed.md):
examples/fused-scale's CUDA variant (host toolchain, the CUDA Torch environment of
scripts/setup.sh, the sandbox on, the cache in extra-sandbox-paths) rebuilt after an
edit of one `.cu` file, against the cold build that filled the cache. Both are whole
Nix builds: configure, compile, link, install, the post-build checks. Target: ≤ 0.3.

    python benchmarks/bench_incremental.py [--repeat N]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from figures import Figure, report, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from compiler_cache import build_with_cache, new_cache  # noqa: E402
from cuda_torch import PYTHON, VARIANT, cuda_torch_missing, with_cuda_torch  # noqa: E402
from nix_projects import git, kernelnix_clone, make_project  # noqa: E402
from paths import EXAMPLES  # noqa: E402

TARGET = 0.3
EDITED = "fused_scale_cuda/kernels.cu"


def one_run(work: Path) -> tuple[float, float, tuple[list[str], list[str]]]:
    """(cold build, rebuild after the edit, what the rebuild compiled and what the cache
    served) in `work`."""
    url, env = kernelnix_clone(work)
    env = with_cuda_torch(env)
    project = make_project(EXAMPLES / "fused-scale", work / "fused-scale", url, env)
    # An author's tree: committed, then edited, so both builds are of a dirty tree and
    # share its op namespace; the first edit is a comment no earlier run had (a fresh
    # derivation each run).
    git(project, "commit", "-qm", "fused-scale")
    source = project / EDITED
    source.write_text(source.read_text() + f"// bench run in {work.name}\n")
    git(project, "add", "-A")
    cache = new_cache(work / "ccache")
    cold = timed(lambda: build_with_cache(project, env, VARIANT, cache, PYTHON))
    source.write_text(source.read_text() + "namespace { [[maybe_unused]] int e = 1; }\n")
    git(project, "add", "-A")
    found: list[tuple[list[str], list[str]]] = []
    rebuilt = timed(lambda: found.append(build_with_cache(project, env, VARIANT, cache, PYTHON)))
    return cold, rebuilt, found[0]


def measure(repeat: int = 1) -> list[Figure]:
    missing = cuda_torch_missing()
    if missing:
        raise RuntimeError(missing)
    runs = []
    for _ in range(repeat):
        with tempfile.TemporaryDirectory(prefix="bench-incremental-") as tmp:
            runs.append(one_run(Path(tmp)))
    missed, served = runs[-1][2]
    return [
        Figure(
            name=f"nix build after a one-file .cu edit, compiler cache on (fused-scale {VARIANT})",
            seconds=min(r[1] for r in runs),
            baseline="the cold nix build that filled the cache",
            baseline_seconds=min(r[0] for r in runs),
            target=TARGET,
            target_text="a rebuild costs under a third of a cold build",
            detail=f"best of {repeat}; the rebuild compiled {', '.join(missed)}; "
            f"the cache served {', '.join(served)}",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=1)
    report(measure(parser.parse_args().repeat))


if __name__ == "__main__":
    main()
