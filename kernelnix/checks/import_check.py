"""Import the variant the way users will: through the `kernels` loader.

The import runs in a fresh interpreter (so nothing leaks into ours) with
HF_HUB_OFFLINE=1, a temporary HOME and no bytecode writing. The variant is
linked into a throw-away repository as `build/<variant>`, so the loader's own
variant resolution picks exactly this variant; a variant meant for another
system (a CUDA variant on a CPU machine), or checked by a Python without Torch
(a noarch variant needs none to build; a tvm-ffi variant needs apache-tvm-ffi
instead), is skipped with a note, not failed.

Importing Torch takes seconds (about 4 s for a CUDA Torch on two cores), so the
build step starts the interpreter before it compiles (`ImportChild`): Torch and
the loader import while CMake configures, when a core is idle, and the check
then only loads the variant. `kernelnix check` starts one when it checks.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kernelnix.checks.context import IMPORT_TIMEOUT, VariantContext
from kernelnix.checks.report import VARIANT_FILE, Violation
from kernelnix.plan.metadata import python_packages

RESULT_MARKER = "KERNELNIX_IMPORT_RESULT "

# Runs in the child interpreter: imports Torch and the loader first, then reads
# one JSON line from stdin: [staging repo, variant name, variant directory].
_IMPORT_SCRIPT = r"""
import json, sys, traceback
from pathlib import Path

def report(**result):
    print("KERNELNIX_IMPORT_RESULT " + json.dumps(result), flush=True)

import importlib.util
found = {name: importlib.util.find_spec(name) is not None for name in ("torch", "tvm_ffi")}
early = None
if not any(found.values()):
    early = dict(status="skipped", reason=f"{sys.executable} has no Torch")
else:
    if found["torch"]:
        try:
            import torch  # the slow part, done before the variant is known
        except Exception:
            pass  # the loader's import of the variant reports it, as a failed import
    try:
        from kernels import get_local_kernel
    except Exception as exc:
        early = dict(status="no-loader", error=f"{type(exc).__name__}: {exc}")
    try:
        from kernels.variants import parse_variant, resolve_variants
    except Exception:
        parse_variant = None
line = sys.stdin.readline()
if not line:
    sys.exit(0)  # the build failed or was stopped: nothing to load
if early is not None:
    report(**early)
    sys.exit(0)
repo, variant, variant_dir, packages = json.loads(line)
repo, variant_dir = Path(repo), Path(variant_dir)
# A tvm-ffi variant loads with TVM FFI and no Torch, every other with Torch.
tvm_ffi = variant.startswith("tvm-ffi")
module, framework = ("tvm_ffi", "apache-tvm-ffi") if tvm_ffi else ("torch", "torch")
if not found[module]:
    report(status="skipped", reason=f"{sys.executable} has no {framework if tvm_ffi else 'Torch'}")
    sys.exit(0)
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
        # A compiled variant's arch names a backend, a noarch one's its name.
        arch = getattr(parsed, "arch", None)
        arch_backend = getattr(getattr(arch, "backend", None), "name", None)
        if (arch_backend or getattr(arch, "backend_name", None)) == "cpu":
            backend = "cpu"
        try:
            _, trace = resolve_variants([parsed], backend=backend)
        except Exception:
            trace = []
        reasons = [d.reason for d in trace if hasattr(d, "reason")]
        if reasons:
            report(status="skipped", reason=reasons[0])
            sys.exit(0)
def releases():
    # The releases it loaded or failed with: a python-depends' API changes between them.
    from importlib.metadata import version
    versions = {}
    for name in [framework, *packages]:
        try:
            versions[name] = version(name)
        except Exception:
            pass
    return versions
try:
    module = get_local_kernel(repo, backend=backend)
except BaseException as exc:
    notes = "".join("\n" + n for n in getattr(exc, "__notes__", []))
    report(status="failed", error=f"{type(exc).__name__}: {exc}{notes}",
           traceback=traceback.format_exc(), versions=releases())
    sys.exit(0)
report(status="ok", module=getattr(module, "__name__", None), versions=releases())
"""

# The build step's environment names the python-depends' environment on
# PYTHONPATH and, where the lock holds other releases of them, those releases'
# environments (kernelnix.compile.local, nix/toolchains/host/setup.sh): a variant
# that fails to load with the first is tried with each of the others in turn.
DEPENDS_VARIABLE = "KERNELNIX_PYTHON_DEPENDS"
ALTERNATIVES_VARIABLE = "KERNELNIX_PYTHON_DEPENDS_ALTERNATIVES"


def alternatives_variables(depends: Path, alternatives: Sequence[Path]) -> dict[str, str]:
    """The variables that tell the import check of the python-depends' environment
    on PYTHONPATH (`depends`) and of its `alternatives`, in the order to try them."""
    if not alternatives:
        return {}
    return {
        DEPENDS_VARIABLE: str(depends),
        ALTERNATIVES_VARIABLE: os.pathsep.join(map(str, alternatives)),
    }


def alternative_environs(environ: Mapping[str, str]) -> list[dict[str, str]]:
    """`environ` once per alternative python-depends' environment it names, with
    that environment on PYTHONPATH in place of the first."""
    depends = environ.get(DEPENDS_VARIABLE)
    others = [p for p in environ.get(ALTERNATIVES_VARIABLE, "").split(os.pathsep) if p]
    path = environ.get("PYTHONPATH", "").split(os.pathsep)
    if not depends or depends not in path:
        return []
    return [
        {**environ, "PYTHONPATH": os.pathsep.join(other if p == depends else p for p in path)}
        for other in others
    ]


def imports_through_kernels(ctx: VariantContext) -> Iterable[Violation]:
    if not ctx.options.import_check:
        return []
    result = run_import(ctx)
    status = result.get("status")
    if status == "ok":
        if result.get("instead"):
            ctx.notes.append(
                f"imported with {_releases(result)}, after the first python-depends' releases "
                f"failed: {_failure_text(result['instead'])}"
            )
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


MISSING_MODULE = re.compile(r"ModuleNotFoundError: No module named '([^'.]+)")


def without_explained_failures(violations: list[Violation]) -> list[Violation]:
    """The violations without an import failure on a module that the python-import
    rule already refuses at load time: one problem, said once, by the rule that
    says why the module is missing."""
    refused = {
        v.subject.split(".")[0]
        for v in violations
        if v.rule == "python-import" and v.severity == "error"
    }

    def explained(violation: Violation) -> bool:
        found = MISSING_MODULE.search(violation.found)
        return violation.rule == "import" and found is not None and found[1] in refused

    return [v for v in violations if not explained(v)]


def _failure_text(result: dict[str, Any]) -> str:
    if result.get("status") == "failed":
        releases = _releases(result)
        text = f"import failed: {result.get('error')}" + (f" (with {releases})" if releases else "")
    else:
        text = f"the import did not complete: {result.get('error')}"
    others = [_failure_text(other) for other in result.get("alternatives", [])]
    if others:
        text += "; with the lock's other releases of its python-depends: " + "; ".join(others)
    return text


def _releases(result: dict[str, Any]) -> str:
    versions = result.get("versions") or {}
    return ", ".join(f"{name} {release}" for name, release in versions.items())


class ImportChild:
    """The interpreter of one import check, started ahead: it imports Torch and the
    loader at once, then waits for the variant to load (`load`). Close it (a `with`
    block) whether or not it loaded anything."""

    def __init__(
        self,
        python: str,
        timeout: float = IMPORT_TIMEOUT,
        environ: Mapping[str, str] | None = None,
        local_kernels: str | None = None,
    ) -> None:
        self.python = python
        self.timeout = timeout
        self._temp = tempfile.TemporaryDirectory(prefix="kernelnix-import-")
        self.work = Path(self._temp.name)
        home = self.work / "home"
        home.mkdir()
        env = {
            **(os.environ if environ is None else environ),
            "HOME": str(home),
            "HF_HUB_OFFLINE": "1",
            "HF_HOME": str(home / "hf"),
            "PYTHONDONTWRITEBYTECODE": "1",
            "PYTHONNOUSERSITE": "1",
        }
        env.pop("LOCAL_KERNELS", None)
        env.pop("KERNELS_CACHE", None)
        if local_kernels:
            # The loader's own way to a dependency's folder (get_kernel_dep).
            env["LOCAL_KERNELS"] = local_kernels
        self._process: subprocess.Popen[str] | None = None
        self._start_error: OSError | None = None
        try:
            self._process = subprocess.Popen(
                [python, "-c", _IMPORT_SCRIPT],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
                env=env,
                cwd=self.work,
            )
        except OSError as exc:
            self._start_error = exc

    def __enter__(self) -> ImportChild:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop the interpreter if it still runs, and remove its directory."""
        if self._process is not None and self._process.poll() is None:
            self._process.kill()
            self._process.communicate()
        self._temp.cleanup()

    def load(self, variant_dir: Path, packages: Sequence[str] = ()) -> dict[str, Any]:
        """Load `variant_dir` through the loader; the result dict always has `status`.
        A failure names the releases of Torch and of `packages` (pip names) it had."""
        if self._process is None:
            return {"status": "no-loader", "python": self.python, "error": str(self._start_error)}
        repo = _staging_repo(self.work, variant_dir)
        fields = [str(repo), variant_dir.name, str(variant_dir.resolve()), list(packages)]
        request = json.dumps(fields) + "\n"
        try:
            stdout, stderr = self._process.communicate(request, timeout=self.timeout)
        except subprocess.TimeoutExpired:
            return {"status": "error", "error": f"timed out after {self.timeout:.0f} s"}
        for line in reversed(stdout.splitlines()):
            if line.startswith(RESULT_MARKER):
                result: dict[str, Any] = json.loads(line[len(RESULT_MARKER) :])
                result.setdefault("python", self.python)
                return result
        # The child died before reporting (a crash in a native library, say).
        tail = (stderr or stdout).strip().splitlines()[-5:]
        return {
            "status": "error",
            "error": f"the interpreter exited with code {self._process.returncode}: "
            + " | ".join(tail),
        }


def run_import(ctx: VariantContext) -> dict[str, Any]:
    """Load the variant in the caller's child interpreter (CheckOptions.import_child),
    else in one started now. A variant that fails to load is loaded again with each
    alternative python-depends' environment (`alternative_environs`): the first
    that loads is the result, with the failure it replaced as `instead`."""
    packages = [p.pip for p in python_packages(ctx.python_depends, ctx.backend or "")]
    options = ctx.options
    python = options.python or sys.executable
    if options.import_child is not None:
        first = options.import_child.load(ctx.variant_dir, packages)
    else:
        with ImportChild(python, options.import_timeout, None, options.local_kernels) as child:
            first = child.load(ctx.variant_dir, packages)
    if first.get("status") != "failed":
        return first
    failed: list[dict[str, Any]] = []
    for environ in alternative_environs(os.environ):
        with ImportChild(python, options.import_timeout, environ, options.local_kernels) as child:
            result = child.load(ctx.variant_dir, packages)
        if result.get("status") == "ok":
            return {**result, "instead": {**first, "alternatives": failed}}
        failed.append(result)
    return {**first, "alternatives": failed}


def _staging_repo(temp: Path, variant_dir: Path) -> Path:
    """A repository whose only variant is a link to `variant_dir`."""
    repo = temp / "repo"
    build = repo / "build"
    build.mkdir(parents=True)
    (build / variant_dir.name).symlink_to(variant_dir.resolve(), target_is_directory=True)
    return repo
