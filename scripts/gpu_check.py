"""Load every variant of a bundle in its own Torch and run its ops against Torch.

    python3 scripts/gpu_check.py BUNDLE [BUNDLE...]

For each variant directory of each bundle (`<variant>/metadata.json`), the
variant's Torch is the environment of its locked wheels (kernelnix's cache,
`kernelnix build --local` makes the same), and a child interpreter loads the
variant through `kernels` and runs the ops this script knows for the kernel
(fused-scale's, relu's, kernels-community activation's) on the variant's
device against Torch's own arithmetic. A CUDA variant on a machine without a
GPU is loaded and its ops are not run. One line per variant; exit 1 when a
variant failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from kernelnix.host.environments import (
    environment_variables,
    locked_environment,
    materialize,
)
from kernelnix.variants.names import parse_variant_name

# Runs in the variant's Torch: argv = [bundle, variant, backend].
CHECK = r"""
import json, sys, torch
from pathlib import Path
from kernels import get_local_kernel

bundle, variant, backend = Path(sys.argv[1]), sys.argv[2], sys.argv[3]
kernel = get_local_kernel(bundle, backend="cpu" if backend == "cpu" else None)
device = "cpu" if backend == "cpu" else "cuda"
line = {"torch": torch.__version__, "device": device}
if device == "cuda" and not torch.cuda.is_available():
    line["status"] = "loaded; no GPU, ops not run"
    print(json.dumps(line)); sys.exit(0)
torch.manual_seed(0)
errors = {}

def compare(name, got, want):
    errors[name] = float((got.float() - want.float()).abs().max())

if hasattr(kernel, "scale_add"):
    x = torch.randn(1 << 16, device=device); y = torch.randn_like(x)
    compare("scale_add", kernel.scale_add(x, y, 0.5), x * 0.5 + y)
if hasattr(kernel, "sum_squares"):
    x = torch.randn(1 << 16, device=device)
    compare("sum_squares", kernel.sum_squares(x), (x * x).sum())
if hasattr(kernel, "silu_and_mul"):
    x = torch.randn(64, 512, device=device, dtype=torch.float16)
    out = torch.empty(64, 256, device=device, dtype=torch.float16)
    kernel.silu_and_mul(out, x)
    compare("silu_and_mul", out, torch.nn.functional.silu(x[:, :256]) * x[:, 256:])
if hasattr(kernel, "relu"):
    x = torch.randn(1024, 1024, device=device)
    compare("relu", kernel.relu(x), torch.relu(x))
line["errors"] = errors
line["status"] = "ok" if errors and max(errors.values()) < 2e-2 else "FAIL"
if not errors:
    line["status"] = "FAIL: no op this script knows"
print(json.dumps(line))
"""


@dataclass(frozen=True)
class BuildSet:
    """What the lock needs of a variant, read from its name."""

    system: str
    kind: str
    torch: str
    backend: str
    backend_version: str | None


def build_set(name: str) -> BuildSet:
    parsed = parse_variant_name(name)
    version = str(parsed.backend_version) if parsed.backend_version else None
    system = parsed.system or ""
    return BuildSet(system, parsed.kind, str(parsed.framework_version), parsed.backend, version)


def check_variant(directory: Path) -> tuple[bool, str]:
    variant = build_set(directory.name)
    environment = locked_environment(variant)
    if environment is None:
        return False, "no locked wheels for this variant"
    root = materialize(environment, log=lambda line: print(line, file=sys.stderr))
    with tempfile.TemporaryDirectory() as temporary:
        # A bundle of this variant alone: the loader picks exactly it.
        single = Path(temporary)
        (single / directory.name).symlink_to(directory.resolve())
        done = subprocess.run(
            [sys.executable, "-c", CHECK, single, directory.name, variant.backend],
            capture_output=True, text=True, check=False,
            env=environment_variables([root], dict(os.environ)),
        )  # fmt: skip
    if done.returncode != 0:
        return False, "FAIL: " + (done.stderr.strip().splitlines() or ["no output"])[-1]
    line = json.loads(done.stdout.splitlines()[-1])
    errors = " ".join(f"{k}={v:.1e}" for k, v in line.get("errors", {}).items())
    text = f"torch {line['torch']} on {line['device']}: {line['status']} {errors}".rstrip()
    return line["status"].startswith(("ok", "loaded")), text


def main(bundles: list[str]) -> int:
    failed = 0
    for bundle in map(Path, bundles):
        for directory in sorted(p for p in bundle.iterdir() if (p / "metadata.json").is_file()):
            ok, text = check_variant(directory)
            failed += not ok
            print(f"{bundle.name}/{directory.name}  {text}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
