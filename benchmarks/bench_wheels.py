"""A multi-variant bundle built from locked wheels, each variant against its own Torch.

examples/fused-scale through a kernelnix whose lock keeps BUILD_SETS (two
Torch releases; `--all` for every locked build set, which fetches about 9 GB),
host toolchain, no compiler cache on either side:

1. `nix build .#bundle` from scratch (the variants deleted from the store; the
   wheels and environments stay), against the same build step run directly in
   each variant's environment (`kernelnix build-variant` with the environment
   on PYTHONPATH, as `kernelnix build --local` runs it). Target: at most 1.15.
2. A no-op rebuild (`nix build .#bundle` again) against `nix eval` of the
   bundle's output path. Target: at most 1.5.
3. After editing one `.cu` file, `kernelnix build --local` (whose build trees
   persist) recompiles that file once per variant that contains it and nothing
   else: its time against the cold build of the same variants (in a committed
   copy with an uncommitted edit, as an author's edit loop), and the object
   files Ninja rebuilt, counted from its log. INFO.
4. Disk, in the detail of the first figure: the unpacked wheels the
   environments link to, and the variants.

    python benchmarks/bench_wheels.py [--all]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from figures import Figure, report, run_quietly, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from nix_projects import git, kernelnix_clone, make_project, nix  # noqa: E402
from paths import EXAMPLES  # noqa: E402
from wheel_locks import LOCK  # noqa: E402

BUILD_SETS = ("2.13-cpu", "2.14-cuda-13")
OVERHEAD_TARGET = 1.15
NOOP_TARGET = 1.5
EDITED = "fused_scale_cuda/kernels.cu"


def all_build_sets() -> tuple[str, ...]:
    host = json.loads(LOCK.read_text())["host"]["environments"]["x86_64-linux"]
    return tuple(sorted({key for sets in host.values() for key in sets}))


def no_cache(env: dict[str, str]) -> dict[str, str]:
    return {**env, "KERNELNIX_COMPILER_LAUNCHER": "none"}


def du(paths: list[str]) -> int:
    if not paths:
        return 0
    done = subprocess.run(["du", "-scbL", *paths], capture_output=True, text=True, check=True)
    return int(done.stdout.splitlines()[-1].split()[0])


def store_paths(project: Path, env: dict[str, str], variants: list[str]) -> dict[str, str]:
    """variant -> its derivation's output, and `env:<variant>` -> its wheel environment."""
    found = {}
    for variant in variants:
        found[variant] = nix(project, env, "eval", "--raw", f".#{variant}.outPath").stdout
        wheel_env = nix(
            project, env, "eval", "--raw", f".#packages.x86_64-linux.{variant}.wheelEnv.outPath"
        ).stdout
        found[f"env:{variant}"] = wheel_env
    return found


def direct_builds(project: Path, variants: list[str], paths: dict[str, str], env: dict) -> None:
    """The build step of every variant in its environment, as the derivation runs it."""
    with tempfile.TemporaryDirectory() as out:
        for variant in variants:
            run_quietly(
                [sys.executable, "-m", "kernelnix", "build-variant",
                 "--plan", str(project / "kernelnix-plan.json"), "--variant", variant,
                 "--source", str(project), "--out", out, "--unique-id", "bench"],
                {**env, "PYTHONPATH": f"{paths[f'env:{variant}']}:{ROOT}"},
            )  # fmt: skip


def rebuilt_objects(log: str) -> list[str]:
    return re.findall(r"Building \w+ object (\S+)", log)


def measure(build_sets: tuple[str, ...] = BUILD_SETS) -> list[Figure]:
    with tempfile.TemporaryDirectory() as tmp:
        work = Path(tmp)
        url, env = kernelnix_clone(work, build_sets)
        env = no_cache(env)
        project = make_project(
            EXAMPLES / "fused-scale", work / "fused-scale", url, env, ("--no-host-record",)
        )
        # Committed, as an author's kernel is: build --local's op namespace then follows
        # the commit, and an uncommitted edit recompiles only the edited file.
        git(project, "commit", "-q", "-m", "fused-scale")
        # Warm-up: wheels fetched and unpacked, environments made, the bundle built once.
        nix(project, env, "build", ".#bundle")
        variants = sorted(p.name for p in (project / "result").iterdir())
        paths = store_paths(project, env, variants)
        bundle = nix(project, env, "eval", "--raw", ".#bundle.outPath").stdout
        direct = timed(lambda: direct_builds(project, variants, paths, env))
        (project / "result").unlink()
        nix(project, env, "store", "delete", bundle, *(paths[v] for v in variants))
        via_nix = timed(lambda: nix(project, env, "build", ".#bundle"))
        evaluation = timed(lambda: nix(project, env, "eval", "--raw", ".#bundle.outPath"))
        noop = timed(lambda: nix(project, env, "build", ".#bundle"))
        # build --local: cold, then one .cu edited.
        local = {**env, "KERNELNIX_CACHE": str(work / "cache")}
        command = ["kernelnix", "build", "--local", str(project), "--no-progress"]
        # An author's edit loop runs in a dirty tree: the first edit after a commit
        # moves the op namespace to `<tree>_dirty` once, the later ones keep it.
        source = project / EDITED
        source.write_text(source.read_text() + "\n// first edit\n")
        cold = timed(lambda: run_quietly(command, local))
        source.write_text(source.read_text() + "// second edit\n")
        outputs: list[str] = []

        def rebuild() -> None:
            done = subprocess.run(command, capture_output=True, text=True, env=local, check=True)
            outputs.append(done.stdout + done.stderr)

        edited = timed(rebuild)
        objects = rebuilt_objects(outputs[0])
        with_edit = [v for v in variants if "-cu1" in v]
        wheels = du([paths[f"env:{v}"] for v in variants])
        built = du([paths[v] for v in variants])
    cuda_variants = ", ".join(with_edit)
    return [
        Figure(
            name=f"nix build .#bundle of fused-scale from locked wheels ({', '.join(variants)})",
            seconds=via_nix,
            baseline="the same build steps run directly, each in its wheels' environment",
            baseline_seconds=direct,
            target=OVERHEAD_TARGET,
            target_text=f"at most {OVERHEAD_TARGET} x",
            detail="no compiler cache on either side; wheels and environments already built; "
            f"disk: unpacked wheels the environments link to {wheels / 1e9:.2f} GB, "
            f"the variants {built / 1e6:.1f} MB",
        ),
        Figure(
            name="no-op nix build .#bundle (every variant in the store)",
            seconds=noop,
            baseline="nix eval .#bundle.outPath",
            baseline_seconds=evaluation,
            target=NOOP_TARGET,
            target_text=f"at most {NOOP_TARGET} x",
        ),
        Figure(
            name=f"build --local after editing {EDITED}",
            seconds=edited,
            baseline="the cold build --local of the same variants",
            baseline_seconds=cold,
            target=None,
            target_text="recompiles the edited file once per variant holding it",
            detail=f"objects rebuilt: {len(objects)} ({', '.join(objects)}); "
            f"variants holding the file: {cuda_variants}",
        ),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--all", action="store_true", help="every locked build set (~9 GB)")
    args = parser.parse_args()
    report(measure(all_build_sets() if args.all else BUILD_SETS))


if __name__ == "__main__":
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    main()
