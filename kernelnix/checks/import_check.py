"""Import the variant the way users will: through the `kernels` loader.

The import runs in a fresh interpreter (so nothing leaks into ours) with
HF_HUB_OFFLINE=1, a temporary HOME and no bytecode writing. The variant is
linked into a throw-away repository as `build/<variant>`, so the loader's own
variant resolution picks exactly this variant; a variant meant for another
system (a CUDA variant on a CPU machine) is skipped with a note, not failed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from kernelnix.checks.context import VariantContext
from kernelnix.checks.report import VARIANT_FILE, Violation

RESULT_MARKER = "KERNELNIX_IMPORT_RESULT "

# Runs in the child interpreter: argv = [staging repo, variant name, variant directory].
_IMPORT_SCRIPT = r"""
import json, sys, traceback
from pathlib import Path

def report(**result):
    print("KERNELNIX_IMPORT_RESULT " + json.dumps(result), flush=True)

repo, variant, variant_dir = Path(sys.argv[1]), sys.argv[2], Path(sys.argv[3])
try:
    from kernels import get_local_kernel
except Exception as exc:
    report(status="no-loader", error=f"{type(exc).__name__}: {exc}")
    sys.exit(0)
try:
    from kernels.variants import parse_variant, resolve_variants
except Exception:
    parse_variant = None
# A CPU variant loads in any Torch when asked for by backend, as users of a
# CUDA Torch ask for it: kernelnix builds CPU variants against CUDA wheels too.
backend = None
if parse_variant is not None:
    try:
        parsed = parse_variant(variant)
    except Exception:
        parsed = None
    if parsed is None:
        repo = variant_dir  # not a variant name: the loader's metadata.json fallback
    else:
        arch_backend = getattr(getattr(parsed, "arch", None), "backend", None)
        if getattr(arch_backend, "name", None) == "cpu":
            backend = "cpu"
        try:
            _, trace = resolve_variants([parsed], backend=backend)
        except Exception:
            trace = []
        reasons = [d.reason for d in trace if hasattr(d, "reason")]
        if reasons:
            report(status="skipped", reason=reasons[0])
            sys.exit(0)
try:
    module = get_local_kernel(repo, backend=backend)
except BaseException as exc:
    notes = "".join("\n" + n for n in getattr(exc, "__notes__", []))
    report(status="failed", error=f"{type(exc).__name__}: {exc}{notes}",
           traceback=traceback.format_exc())
    sys.exit(0)
report(status="ok", module=getattr(module, "__name__", None))
"""


def imports_through_kernels(ctx: VariantContext) -> Iterable[Violation]:
    if not ctx.options.import_check:
        return []
    result = run_import(ctx)
    status = result.get("status")
    if status == "ok":
        return []
    if status == "skipped":
        ctx.notes.append(f"import check skipped: not loadable on this machine ({result['reason']})")
        return []
    if status == "no-loader":
        return [
            Violation(
                rule="import",
                file=VARIANT_FILE,
                subject="kernels loader",
                found=f"not importable in {result.get('python')}: {result.get('error')}",
                limit="the `kernels` package installed in the checking interpreter",
                fix="pip install kernels, or skip this check with --no-import",
            )
        ]
    return [
        Violation(
            rule="import",
            file=VARIANT_FILE,
            subject="kernels.get_local_kernel",
            found=_failure_text(result),
            limit="the variant imports through the kernels loader",
            fix='fix the error above; for the full traceback run: python -c "import kernels, '
            f"pathlib; kernels.get_local_kernel(pathlib.Path('{ctx.variant_dir}'))\"",
        )
    ]


def _failure_text(result: dict[str, Any]) -> str:
    if result.get("status") == "failed":
        return f"import failed: {result.get('error')}"
    return f"the import did not complete: {result.get('error')}"


def run_import(ctx: VariantContext) -> dict[str, Any]:
    """Run the loader in a child interpreter; the result dict always has `status`."""
    python = ctx.options.python or sys.executable
    with tempfile.TemporaryDirectory(prefix="kernelnix-import-") as temp:
        temp_path = Path(temp)
        repo = _staging_repo(temp_path, ctx.variant_dir)
        home = temp_path / "home"
        home.mkdir()
        env = {
            **os.environ,
            "HOME": str(home),
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(home / "hf"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
        }
        env.pop("LOCAL_KERNELS", None)
        env.pop("KERNELS_CACHE", None)
        try:
            completed = subprocess.run(
                [
                    python,
                    "-c",
                    _IMPORT_SCRIPT,
                    str(repo),
                    ctx.variant_dir.name,
                    str(ctx.variant_dir.resolve()),
                ],
                capture_output=True,
                text=True,
                env=env,
                cwd=temp,
                timeout=ctx.options.import_timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return {
                "status": "error",
                "error": f"timed out after {ctx.options.import_timeout:.0f} s",
            }
        except OSError as exc:
            return {"status": "no-loader", "python": python, "error": str(exc)}
    for line in reversed(completed.stdout.splitlines()):
        if line.startswith(RESULT_MARKER):
            result = json.loads(line[len(RESULT_MARKER) :])
            result.setdefault("python", python)
            return result
    # The child died before reporting (a crash in a native library, say).
    tail = (completed.stderr or completed.stdout).strip().splitlines()[-5:]
    return {
        "status": "error",
        "error": f"the interpreter exited with code {completed.returncode}: " + " | ".join(tail),
    }


def _staging_repo(temp: Path, variant_dir: Path) -> Path:
    """A repository whose only variant is a link to `variant_dir`."""
    repo = temp / "repo"
    build = repo / "build"
    build.mkdir(parents=True)
    (build / variant_dir.name).symlink_to(variant_dir.resolve(), target_is_directory=True)
    return repo
