"""Measure real compile units of the huge kernels (flash-attn2, flash-attn3 of
kernels-community) one object at a time, as the object derivations of an
object-by-object build run them (docs/distributed.md): the variant configured
once (`build-variant --step configure`), then each sampled source compiled alone
(`build-variant --step object`) under /usr/bin/time, for its CPU time (user and
system, of every process of the step: what it takes alone on a core, whatever
else the machine runs; nvcc runs one thread per arch here, and each unit has one
arch) and the peak resident memory of its largest process. Writes
benchmarks/data/huge-kernel-samples.json, which bench_objects.py predicts from.

The kernels come from the kernels-community snapshot (bench_conformance.py's),
CUTLASS's headers from a git checkout of NVIDIA/cutlass at the release each
kernel names (`--cutlass DIR`), Torch and nvcc 13.0 from the CUDA virtual
environment scripts/setup.sh makes (.venv-cu130). Objects run `--parallel` at
a time (default 2, this machine's cores), each with nvcc's --threads as the
configure step chose for `-j 2`.

    python benchmarks/sample_huge.py [--kernel flash-attn3] [--parallel 2]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_conformance import COMMUNITY_GIT, extract, snapshot_commit

ROOT = Path(__file__).resolve().parent.parent
PYTHON = ROOT / ".venv-cu130" / "bin" / "python"
SAMPLES = Path(__file__).resolve().parent / "data" / "huge-kernel-samples.json"
SYSTEM = "x86_64-linux"

# Per kernel: the variant, the archs each unit is compiled for here (None: the
# plan's), the CUTLASS release its `depends` names, and the sources sampled
# (regular expressions, each matching one source: the slowest families, hdim 256
# backward among them, and the common ones).
KERNELS: dict[str, dict[str, object]] = {
    "flash-attn3": {
        "variant": "torch-stable-abi29-cu130-x86_64-linux",
        "archs": None,
        "cutlass": ("cutlass_4_0", "v4.0.0"),
        "sample": [
            r"flash_bwd_hdim256_bf16_sm90\.cu$",
            r"flash_bwd_hdim128_bf16_sm90\.cu$",
            r"flash_bwd_hdim64_fp16_sm90\.cu$",
            r"flash_fwd_hdim256_bf16_sm90\.cu$",
            r"flash_fwd_hdim128_bf16_paged_split_softcap_sm90\.cu$",
            r"flash_fwd_hdim64_e4m3_sm90\.cu$",
            r"flash_bwd_hdim256_bf16_sm80\.cu$",
            r"flash_fwd_hdim128_bf16_sm80\.cu$",
            r"flash_api_stable\.cpp$",
        ],
    },
    "flash-attn2": {
        "variant": "torch-stable-abi210-cu130-x86_64-linux",
        "archs": "9.0",
        "cutlass": ("cutlass_3_6", "v3.6.0"),
        "sample": [
            r"flash_bwd_hdim256_bf16_sm80\.cu$",
            r"flash_bwd_hdim128_fp16_causal_sm80\.cu$",
            r"flash_fwd_hdim128_bf16_sm80\.cu$",
            r"flash_fwd_split_hdim64_fp16_sm80\.cu$",
        ],
    },
}


def cutlass_include(release: str, cutlass: Path, work: Path) -> Path:
    """CUTLASS's include folders at `release` (git archive of the checkout)."""
    target = work / f"cutlass-{release}"
    if not (target / "include").is_dir():
        target.mkdir(parents=True, exist_ok=True)
        archive = subprocess.run(
            ["git", "--git-dir", str(cutlass), "archive", release, "include", "tools/util/include"],
            check=True,
            capture_output=True,
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    return target / "include"


def arch_factor(plan: Path, variant: str, sampled: object) -> int:
    """How many times the variant compiles each unit's sampled archs: its kernels'
    most archs over the archs sampled (1 when sampled with the plan's)."""
    kernels = json.loads(plan.read_text())["variants"][SYSTEM][variant]["kernels"]
    most = max((len(archs) for archs in kernels.values() if archs), default=1)
    return most // len(str(sampled).split(",")) if sampled else 1


def step(plan: Path, variant: str, work: Path, *args: str, env: dict[str, str]) -> str:
    command = [
        "/usr/bin/time", "-f", "kernelnix-sample %U %S %M", str(PYTHON), "-m", "kernelnix",
        "build-variant", "--plan", str(plan), "--variant", variant, "--system", SYSTEM,
        "--work-dir", str(work), "-j", "2", *args,
    ]  # fmt: skip
    done = subprocess.run(command, env=env, capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(args)} failed:\n{done.stdout[-2000:]}{done.stderr[-3000:]}")
    return done.stderr


def measured(stderr: str) -> tuple[float, int]:
    """(CPU seconds, peak resident memory in KiB) from /usr/bin/time's line."""
    user, system, kib = re.findall(r"kernelnix-sample ([\d.]+) ([\d.]+) (\d+)", stderr)[-1]
    return float(user) + float(system), int(kib)


def sample_kernel(name: str, cutlass: Path, work: Path, parallel: int) -> dict[str, object]:
    spec = KERNELS[name]
    directory = extract(name, work / "kernels")
    plan = work / f"{name}-plan.json"
    subprocess.run(
        [str(PYTHON), "-m", "kernelnix", "plan", str(directory), "-o", str(plan),
         "--unique-id", "sample"],
        check=True, capture_output=True,
    )  # fmt: skip
    key, release = spec["cutlass"]  # type: ignore[misc]
    env = {
        **os.environ,
        "HF_HUB_OFFLINE": "1",
        "KERNELNIX_COMPILER_LAUNCHER": "none",
        f"KERNELNIX_DEP_{key.upper()}": str(cutlass_include(release, cutlass, work)),
    }
    variant = str(spec["variant"])
    archs = ("--cuda-archs", str(spec["archs"])) if spec["archs"] else ()
    configured = work / f"{name}-configured"
    shutil.rmtree(work / "configure" / name, ignore_errors=True)  # a cold configure
    stderr = step(plan, variant, work / "configure" / name, "--step", "configure",
                  "--out", str(configured), *archs, env=env)  # fmt: skip
    configure_seconds, _ = measured(stderr)
    units = sorted(json.loads((configured / "objects.json").read_text())["objects"])
    chosen = [next(u for u in units if re.search(p, u)) for p in spec["sample"]]  # type: ignore[attr-defined]

    def compile_one(index_unit: tuple[int, str]) -> dict[str, object]:
        index, unit = index_unit
        stderr = step(
            plan, variant, work / "objects" / name / str(index), "--step", "object",
            "--configured", str(configured), "--object", unit, "--source", str(directory),
            "--out", str(work / "out" / name / str(index)), *archs, env=env,
        )  # fmt: skip
        seconds, kib = measured(stderr)
        print(f"{name} {unit}: {seconds:.0f} s, {kib / 1024:.0f} MiB", flush=True)
        return {"source": unit, "cpu-seconds": seconds, "peak-mib": round(kib / 1024)}

    with ThreadPoolExecutor(parallel) as pool:
        samples = list(pool.map(compile_one, enumerate(chosen)))
    return {
        "variant": variant,
        "archs": spec["archs"] or "the plan's",
        # Each unit compiles for as many archs in the variant as the plan gives its kernel.
        "arch-factor": arch_factor(plan, variant, spec["archs"]),
        "configure-cpu-seconds": configure_seconds,
        "units": units,
        "samples": samples,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", action="append", choices=sorted(KERNELS))
    parser.add_argument("--parallel", type=int, default=2)
    parser.add_argument("--cutlass", type=Path, default=Path("/work/.mirror/NVIDIA+cutlass/repo"))
    parser.add_argument("--work", type=Path)
    args = parser.parse_args()
    work = args.work or Path(tempfile.mkdtemp(prefix="huge-samples-"))
    recorded = json.loads(SAMPLES.read_text()) if SAMPLES.exists() else {"kernels": {}}
    recorded["snapshot"] = snapshot_commit(COMMUNITY_GIT)
    recorded["machine"] = f"{os.cpu_count()} cores, nvcc 13.0, objects {args.parallel} at a time"
    for name in args.kernel or sorted(KERNELS):
        recorded["kernels"][name] = sample_kernel(name, args.cutlass, work, args.parallel)
        SAMPLES.parent.mkdir(parents=True, exist_ok=True)
        SAMPLES.write_text(json.dumps(recorded, indent=1) + "\n")


if __name__ == "__main__":
    main()
