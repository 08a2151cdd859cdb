"""The build step of one variant: the same code inside a Nix derivation and for
`kernelnix build --local`.

Compiled variants: render the CMake project into a work directory (never the
kernel's sources), configure with Ninja, compile, install into a staging
directory, check that the library holds exactly the planned GPU archs.
Noarch variants: copy the Python package, generate `_ops.py`. Then write the
metadata with provenance, run the post-build checks and only then move the
variant directory into place: a failed build leaves nothing behind, a killed
one at most a temporary directory that the next build removes (kernelnix.core.fileio).
"""

from __future__ import annotations

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass
from pathlib import Path

from kernelnix.checks import (
    DEFAULT_POLICY,
    CheckOptions,
    ImportChild,
    render_reports,
    run_checks,
)
from kernelnix.compile import objects
from kernelnix.compile.dependencies import dependency_definitions
from kernelnix.compile.glibc import (
    GlibcTarget,
    cmake_definitions,
    read_glibc_target,
    unbound_newer_functions,
    undeclared_newer_functions,
)
from kernelnix.compile.gpu_archs import ArchsUnknown, compiled_archs
from kernelnix.compile.hipify import (
    CUDA_SUFFIXES,
    hipify_tree,
    needs_hipify,
    with_hipified_sources,
)
from kernelnix.compile.nvcc_host import configure_environment, host_compiler_definitions
from kernelnix.core.diagnostics import Diagnostic, UserError
from kernelnix.core.fileio import replacing_dir
from kernelnix.core.process import run_shown, shown
from kernelnix.emit.cmake import cmake_project, noarch_ops_py, write_project
from kernelnix.host.kernel_deps import fetch_kernel_deps, local_kernels_value
from kernelnix.host.machine import compiler_version, host_check_policy, why_not_buildable
from kernelnix.plan.gencode import capability_base, cuda_gencode
from kernelnix.plan.ids import check_unique_id
from kernelnix.plan.metadata import (
    GIT_COMMIT,
    BuildProvenance,
    python_packages,
    unknown_provenance,
)
from kernelnix.plan.model import KernelGitState, Plan, PlanVariant


class BuildError(Exception):
    """A build that ran and failed (a compiler error, a failed check)."""


@dataclass(frozen=True)
class Prebuilt:
    """A variant's objects built by earlier steps: its configured tree
    (configure_variant) and the outputs of its object steps (compile_object)."""

    configured: Path
    objects: list[Path]


# What a failed compile's output says, in kernelnix's words (none: nothing recognised).
Explain = Callable[[str], list[Diagnostic]]


def run_command(
    args: list[str], env: dict[str, str] | None = None, cwd: Path | None = None
) -> None:
    """Run a command, printing it first as `+ cmd`; BuildError when it fails."""
    done = run_shown(args, env=env, cwd=cwd)
    if done.returncode != 0:
        raise BuildError(f"{Path(args[0]).name} exited with status {done.returncode}")


def run_compile(args: list[str], env: dict[str, str] | None, explain: Explain | None) -> None:
    """run_command for the compile: its output is shown as it comes and read when it
    fails, so that `explain` can turn what it recognises into one UserError."""
    print(shown(args), file=sys.stderr, flush=True)
    lines = []
    with subprocess.Popen(
        args, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    ) as process:
        assert process.stdout is not None
        for line in process.stdout:
            sys.stdout.write(line)
            lines.append(line)
    sys.stdout.flush()
    if process.returncode != 0:
        explained = explain("".join(lines)) if explain else []
        if explained:
            raise UserError(explained)
        raise BuildError(f"{Path(args[0]).name} exited with status {process.returncode}")


def apply_unique_id(plan: Plan, unique: str) -> Plan:
    """`plan` with another unique id (`-` read as `_`); a UserError when it is invalid."""
    try:
        return plan.with_unique_id(check_unique_id(unique.replace("-", "_")))
    except ValueError as exc:
        raise UserError.single(str(exc), key="--unique-id") from None


def _is_capability(arch: str) -> bool:
    try:
        capability_base(arch)
    except ValueError:
        return False
    return True


def parse_cuda_archs(text: str) -> list[str]:
    """`--cuda-archs`: comma-separated capabilities, or `native`: the visible GPUs'."""
    if text.strip() == "native":
        return visible_cuda_archs()
    archs = [arch.strip() for arch in text.split(",") if arch.strip()]
    if not archs or not all(map(_is_capability, archs)):
        raise UserError.single(
            f"invalid --cuda-archs {text!r}",
            key="--cuda-archs",
            fix="give CUDA capabilities, comma-separated (9.0 or 8.0,9.0a), or native",
        )
    return archs


def visible_cuda_archs() -> list[str]:
    """The capabilities of the CUDA GPUs Torch sees; a UserError when it sees none."""
    try:
        import torch
    except ImportError:
        torch = None  # type: ignore[assignment]
    if torch is None or not torch.cuda.is_available():
        raise UserError.single(
            "--cuda-archs native: no CUDA GPU is visible to this Python's Torch",
            key="--cuda-archs",
            fix="name the archs instead, e.g. --cuda-archs 9.0",
        )
    return sorted(
        {
            "{}.{}".format(*torch.cuda.get_device_capability(i))
            for i in range(torch.cuda.device_count())
        }
    )


def with_cuda_archs(plan: Plan, requested: list[str]) -> Plan:
    """`plan` as a development build: every CUDA kernel compiled only for those of its
    planned archs that the requested ones name (`9.0` picks a planned `9.0a` or
    `9.0+PTX` too). A kernel planned for none of them is a UserError naming its archs."""
    wanted = {capability_base(arch) for arch in requested}
    unmatched: dict[str, list[str]] = {}

    def restrict(variant: PlanVariant) -> PlanVariant:
        if variant.backend != "cuda" or variant.kind not in ("arch", "stable-abi"):
            return variant
        kernels: dict[str, list[str] | None] = {}
        compiled = {}
        for name, archs in variant.kernels.items():
            planned = archs or []
            chosen = [a for a in planned if capability_base(a) in wanted]
            if not chosen:
                unmatched[name] = planned
                chosen = planned
            kernels[name] = chosen
            planned_gencode = set(cuda_gencode(planned))
            rest = [f for f in variant.compile[name].gpu_flags if f not in planned_gencode]
            compiled[name] = variant.compile[name].model_copy(
                update={"gpu_flags": cuda_gencode(chosen) + rest}
            )
        union = sorted({a for archs in kernels.values() for a in archs or []})
        backend = variant.metadata.backend.model_copy(update={"archs": union})
        return variant.with_metadata(backend=backend).model_copy(
            update={
                "kernels": kernels,
                "compile": compiled,
                "development_archs": sorted(set(requested)),
            }
        )

    restricted = plan.with_variants(restrict)
    if unmatched:
        raise UserError(
            [
                Diagnostic(
                    f"kernel {name!r} is built for {', '.join(archs)}; none of them is in "
                    f"--cuda-archs {','.join(requested)}",
                    key="--cuda-archs",
                    fix=f"pick some of {', '.join(archs)}",
                )
                for name, archs in unmatched.items()
            ]
        )
    return restricted


_REVISION = re.compile(rf"(?P<commit>{GIT_COMMIT.pattern})(?P<dirty>-dirty)?")


def apply_kernel_revision(plan: Plan, revision: str) -> Plan:
    """`plan` with the kernel commit the build really has: `<commit>`,
    `<commit>-dirty`, or "" when unknown (provenance then names none).
    The commit is what the `kernels` loader accepts in metadata.json: a full one.

    A plan records the commit of when it was written, and Nix rewrites it only
    when build.toml changes; the flake passes `self.rev` here instead.
    """
    match = _REVISION.fullmatch(revision)
    if revision and match is None:
        raise UserError.single(
            f"invalid kernel revision {revision!r}: expected a full git commit (40 or 64 hex "
            "digits, what the `kernels` loader accepts in metadata.json), optionally "
            "followed by -dirty, or an empty string when unknown",
            key="--kernel-git",
            fix="pass the whole commit, e.g. --kernel-git $(git rev-parse HEAD)",
        )
    kernel = (
        KernelGitState(commit=match["commit"].lower(), dirty=bool(match["dirty"]))
        if match
        else None
    )
    return plan.with_kernel_git(kernel)


def metadata_text(
    variant: PlanVariant, toolchain: str, redistributable: bool, policy: str | None = None
) -> str:
    """metadata.json of a variant: the plan's, plus kernelnix's provenance.

    `toolchain` is one of matrix.json's toolchain names (build-variant's --toolchain);
    `policy` the check policy the build holds the variant to.
    """
    own = BuildProvenance(
        toolchain=toolchain,
        redistributable=redistributable,
        policy=policy,
        development_archs=variant.development_archs,
    )
    provenance = variant.metadata.provenance or unknown_provenance()
    metadata = variant.with_metadata(provenance=provenance.model_copy(update={"kernelnix": own}))
    return metadata.metadata.to_json_text()


LAUNCHERS = ("sccache", "ccache")
LAUNCHED_LANGUAGES = ("C", "CXX", "CUDA", "HIP", "OBJCXX")


def compiler_launcher() -> str | None:
    """The compiler cache the build uses: `KERNELNIX_COMPILER_LAUNCHER` (a program, or
    `none`), else sccache or ccache when installed and the user's home is writable."""
    chosen = os.environ.get("KERNELNIX_COMPILER_LAUNCHER")
    if chosen is not None:
        return None if chosen in ("", "none") else shutil.which(chosen) or chosen
    # A cache needs a home to write to: a Nix build (HOME=/homeless-shelter) has none.
    home = os.environ.get("HOME", "")
    if not (os.path.isdir(home) and os.access(home, os.W_OK)):
        return None
    return next(filter(None, map(shutil.which, LAUNCHERS)), None)


def _compile_environment(launcher: str | None, work: Path) -> dict[str, str] | None:
    """The compile's environment, so that a fresh copy of the tree elsewhere hits ccache:
    paths under the work directory (the project, the kernel's tree linked into it, the
    build tree) hashed relative to it, and not the working directory itself, which
    ccache hashes for every nvcc compile (its only use: the directory recorded in -g
    debug information). A setting of the user's own is kept."""
    if launcher is None or Path(launcher).name != "ccache":
        return None
    defaults = {"CCACHE_BASEDIR": str(work.resolve()), "CCACHE_NOHASHDIR": "1"}
    if "CCACHE_HASHDIR" in os.environ:
        del defaults["CCACHE_NOHASHDIR"]
    return {**defaults, **os.environ}


KERNEL_DIR = "kernel"


def _stage_kernel(project: Path, source_dir: Path, sources: list[str] | None) -> Path:
    """The kernel's tree as <project>/kernel, the KERNEL_SOURCE_DIR of the CMake project:
    a copy of `sources` (those `source_dir` has), or, None, a link to `source_dir`
    (the build's own hipified tree).

    A source's path is then the same in every build: CMake names the object file of
    a source outside the project after its absolute path (which nvcc's -MT carries
    into the command a compiler cache hashes), and nvcc names a source's anonymous
    namespaces after its real path, which a link to the store would make the
    source's store path. File times are kept: an incremental build compiles only
    what changed.
    """
    kernel = project.resolve() / KERNEL_DIR
    if kernel.is_symlink():
        kernel.unlink()
    elif kernel.exists() and sources is None:
        shutil.rmtree(kernel)
    if sources is None:
        kernel.symlink_to(source_dir.resolve(), target_is_directory=True)
        return kernel
    for source in sources:
        if (source_dir / source).is_file():
            (kernel / source).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(source_dir / source, kernel / source)
            (kernel / source).chmod(0o644)
    return kernel


def _cmake_definitions(
    plan: Plan,
    variant: PlanVariant,
    source_dir: Path,
    jobs: int | None,
    launcher: str | None,
    redistributable: bool,
    glibc: GlibcTarget | None,
    work: Path,
) -> list[str]:
    definitions = [
        *(cmake_definitions(glibc) if glibc else []),
        f"-DKERNEL_SOURCE_DIR={source_dir}",
        f"-DPython_EXECUTABLE={sys.executable}",
        *(["-DKERNELNIX_PRIVATE_CXX_RUNTIME=ON"] if redistributable else []),
        *dependency_definitions(plan, variant),
        *(
            f"-DCMAKE_{language}_COMPILER_LAUNCHER={launcher}"
            for language in (LAUNCHED_LANGUAGES if launcher else ())
            if language != "CUDA"
        ),
    ]
    backend = variant.backend
    if backend in ("cuda", "xpu"):
        compiler = compiler_version(backend)
        language = "CUDA" if backend == "cuda" else "CXX"
        if compiler:
            definitions.append(f"-DCMAKE_{language}_COMPILER={compiler[0]}")
    if backend == "cuda":
        definitions += host_compiler_definitions(work, launcher)
        most_archs = max((len(a or []) for a in variant.kernels.values()), default=1)
        nvcc_jobs, threads = nvcc_concurrency(jobs, most_archs)
        definitions += [f"-DNVCC_THREADS={threads}", f"-DNVCC_JOBS={nvcc_jobs or 0}"]
    return definitions


MAX_NVCC_JOBS = "KERNELNIX_MAX_NVCC_JOBS"


def max_nvcc_jobs() -> int | None:
    """`KERNELNIX_MAX_NVCC_JOBS`: at most this many CUDA compiles at once; None: unset."""
    text = os.environ.get(MAX_NVCC_JOBS, "").strip()
    if not text:
        return None
    if not text.isdigit() or int(text) < 1:
        raise UserError.single(
            f"invalid {MAX_NVCC_JOBS}={text!r}",
            key=MAX_NVCC_JOBS,
            fix="give a positive number of CUDA compiles to run at once, or unset it",
        )
    return int(text)


def nvcc_concurrency(jobs: int | None, most_archs: int) -> tuple[int | None, int]:
    """(CUDA compiles at once, None: as many as Ninja runs; nvcc `--threads` of each),
    so that compiles x threads stay within the cores (`jobs`, else this machine's): at
    most `KERNELNIX_MAX_NVCC_JOBS` compiles, each with the cores left to it, up to one
    thread per arch."""
    cores = jobs or os.cpu_count() or 1
    limit = max_nvcc_jobs()
    at_once = min(cores, limit) if limit else cores
    return (at_once if limit else None), max(1, min(most_archs, cores // at_once))


def _check_archs(library: Path, variant: PlanVariant) -> None:
    try:
        found = compiled_archs(library, variant.backend)
    except ArchsUnknown as exc:
        print(f"note: {library.name}: GPU archs not verified: {exc}", flush=True)
        return
    if found is not None and found != sorted(variant.archs or []):
        raise BuildError(
            f"{library.name} holds code for {', '.join(found) or 'no arch'}, but the plan "
            f"asks for {', '.join(variant.archs or [])}"
        )


def _configure(
    plan: Plan,
    system: str,
    name: str,
    source_dir: Path,
    work: Path,
    metadata: str,
    jobs: int | None,
    redistributable: bool,
    glibc: GlibcTarget | None,
) -> tuple[Path, Path, str | None]:
    """Write and configure the variant's CMake project in `work`: (the build tree, the
    kernel's tree as the project sees it, the compiler launcher)."""
    variant = plan.variant(system, name)
    staged: list[str] | None = list(plan.sources)
    if needs_hipify(plan, variant):
        sources = [
            s for k in variant.compile for s in plan.kernels[k].src if s.endswith(CUDA_SUFFIXES)
        ]
        print(f"hipify {', '.join(sources)} (torch.utils.hipify)", flush=True)
        plan = with_hipified_sources(plan, hipify_tree(source_dir, work / "hipified", sources))
        source_dir, staged = work / "hipified", None
    project, build = work / objects.PROJECT, work / objects.BUILD
    write_project({**cmake_project(plan, system, name), "metadata.json": metadata}, project)
    kernel = _stage_kernel(project, source_dir, staged)
    launcher = compiler_launcher()
    definitions = _cmake_definitions(
        plan, variant, kernel, jobs, launcher, redistributable, glibc, work
    )
    run_command(
        ["cmake", "-G", "Ninja", "-S", str(project), "-B", str(build), *definitions],
        configure_environment(definitions),
    )
    return build, kernel, launcher


def _glibc_explain(glibc: GlibcTarget | None, kernel: Path) -> Explain | None:
    """What a compile's output says of a function newer than the glibc target."""
    if glibc is None:
        return None
    return lambda output: undeclared_newer_functions(output, glibc, kernel)


def _check_unbound(build: Path, variant: PlanVariant, glibc: GlibcTarget | None) -> None:
    if glibc:
        unbound = unbound_newer_functions(build / variant.library, build, glibc)
        if unbound:
            raise UserError(unbound)


@contextmanager
def _compiled(
    plan: Plan,
    system: str,
    name: str,
    source_dir: Path,
    work_dir: Path | None,
    metadata: str,
    jobs: int | None,
    redistributable: bool,
    glibc: GlibcTarget | None,
) -> Iterator[Path]:
    """Configure and compile the variant's CMake project; yields its build tree.
    With a glibc target, a function newer than it is one UserError (kernelnix.compile.glibc)."""
    variant = plan.variant(system, name)
    with _work_dir(work_dir) as work:
        build, kernel, launcher = _configure(
            plan, system, name, source_dir, work, metadata, jobs, redistributable, glibc
        )
        run_compile(
            ["cmake", "--build", str(build), *(["-j", str(jobs)] if jobs else [])],
            _compile_environment(launcher, work),
            _glibc_explain(glibc, kernel),
        )
        _check_unbound(build, variant, glibc)
        yield build


@contextmanager
def _linked(
    plan: Plan,
    system: str,
    name: str,
    prebuilt: Prebuilt,
    source_dir: Path,
    work_dir: Path | None,
    metadata: str,
    glibc: GlibcTarget | None,
) -> Iterator[Path]:
    """The variant's objects, compiled one derivation each, linked in a copy of its
    configured tree; yields the build tree, as _compiled does."""
    variant = plan.variant(system, name)
    with _work_dir(work_dir) as work:
        project, build = objects.restore_configured(prebuilt.configured, work)
        (project / "metadata.json").write_text(metadata)
        _stage_kernel(project, source_dir, list(plan.sources))
        objects.place_objects(prebuilt.configured, build, prebuilt.objects)
        run_command(["sh", "-c", objects.link_command(build, variant.library)], cwd=build)
        _check_unbound(build, variant, glibc)
        yield build


def _configured_plan(plan: Plan, system: str, name: str, unique_id: str | None) -> Plan:
    """The plan a configure or object step builds from; a UserError for a variant the
    steps cannot build object by object."""
    if unique_id is not None:
        plan = apply_unique_id(plan, unique_id)
    variant = plan.variant(system, name)
    if variant.kind == "noarch" or needs_hipify(plan, variant):
        why = "it compiles nothing" if variant.kind == "noarch" else "it hipifies its sources"
        raise UserError.single(
            f"{name} cannot be built object by object: {why}",
            fix="build it in one step (`--step variant`, without --configured)",
        )
    return plan


def configure_variant(
    plan: Plan,
    system: str,
    name: str,
    out: Path,
    *,
    unique_id: str | None = None,
    redistributable: bool = False,
    jobs: int | None = None,
    work_dir: Path | None = None,
    glibc_target: Path | None = None,
) -> Path:
    """The variant's configured CMake project and build tree, and the objects it
    compiles (kernelnix.compile.objects), into `out`. It reads the sources' names
    only (the plan's), never their text."""
    plan = _configured_plan(plan, system, name, unique_id)
    glibc = read_glibc_target(glibc_target) if glibc_target else None
    with _work_dir(work_dir) as work:
        skeleton = objects.write_skeleton(plan, work / "skeleton")
        _, kernel, _ = _configure(
            plan, system, name, skeleton, work, "{}\n", jobs, redistributable, glibc
        )
        with replacing_dir(out) as target:
            objects.save_configured(work, kernel, target)
    print(f"configured {name}: {len(objects.configured_objects(out))} objects", flush=True)
    return out


def compile_object(
    plan: Plan,
    system: str,
    name: str,
    configured: Path,
    source: str,
    source_dir: Path,
    out: Path,
    *,
    work_dir: Path | None = None,
    glibc_target: Path | None = None,
) -> Path:
    """Compile `source` of variant `name` in a copy of its configured tree, as the
    one-step build's Ninja would; its object, at its path in the build tree, into `out`."""
    variant = plan.variant(system, name)
    output = objects.object_of(configured, source)
    glibc = read_glibc_target(glibc_target) if glibc_target else None
    launcher = compiler_launcher()
    with _work_dir(work_dir) as work:
        project, build = objects.restore_configured(configured, work)
        # The object's own source tree holds the headers and this source only.
        kernel = _stage_kernel(project, source_dir, list(plan.sources))
        if variant.backend == "cuda":
            # nvcc's host compiler wrappers, which the configure step wrote outside
            # its tree, at the same path (named after their text).
            host_compiler_definitions(work, launcher)
        run_compile(
            ["ninja", "-C", str(build), output],
            _compile_environment(launcher, work),
            _glibc_explain(glibc, kernel),
        )
        with replacing_dir(out) as target:
            (target / output).parent.mkdir(parents=True)
            shutil.copyfile(build / output, target / output)
    return out / output


def _install(build: Path, target: Path, variant: PlanVariant, strip: bool) -> None:
    """Install the variant; `strip`: without its symbol table, as published."""
    run_command(
        ["cmake", "--install", str(build), "--prefix", str(target), *(["--strip"] if strip else [])]
    )
    _check_archs(target / variant.library, variant)


def _stage_noarch(plan: Plan, source_dir: Path, target: Path, metadata: str) -> None:
    package = plan.package_dir + "/"
    for source in plan.sources:
        relative = source.removeprefix(package)
        if source.startswith(package) and relative != "_ops.py":
            (target / relative).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source_dir / source, target / relative)
    target.mkdir(parents=True, exist_ok=True)
    (target / "_ops.py").write_text(noarch_ops_py(plan.python_name, plan.unique_id))
    (target / "metadata.json").write_text(metadata)


def require_python_depends(variant: PlanVariant, name: str) -> None:
    """A UserError naming each python-depends package the build Python lacks: the
    import check would otherwise fail at every file that imports it. Nothing to
    check without Torch, where the import check is skipped."""
    if importlib.util.find_spec("torch") is None:
        return
    names = list(variant.metadata.python_depends)
    missing = [
        package
        for package in python_packages(names, variant.backend)
        if package.module is not None and importlib.util.find_spec(package.module) is None
    ]
    if missing:
        raise UserError(
            [
                Diagnostic(
                    f"python-depends {package.depends!r}: the build Python {sys.executable} "
                    f"has no module {package.module!r} (pip package {package.pip}), which "
                    f"the import check of {name} needs",
                    key="general.python-depends",
                    fix="build through `kernelnix build` (its variant environments hold the "
                    "python-depends of the wheel lock), or install it: "
                    f"{sys.executable} -m pip install {package.pip}",
                )
                for package in missing
            ]
        )


def build_policy(redistributable: bool) -> tuple[str, str]:
    """The check policy a build holds its variant to, and why (printed with the verdict).

    Redistributable builds meet the publishing policy; host builds, which only
    need to load on this machine, the manylinux policy of its glibc.
    """
    if redistributable:
        return DEFAULT_POLICY, "a redistributable build meets the publishing policy"
    host = host_check_policy()
    if host is None:
        return DEFAULT_POLICY, "a host build on a system without glibc: the default policy"
    return host, "a host build needs to load on this machine: its glibc's manylinux level"


def run_post_build_checks(
    variant_dir: Path,
    redistributable: bool,
    import_check: bool = True,
    import_child: ImportChild | None = None,
    local_kernels: str | None = None,
) -> None:
    """The post-build hook: kernelnix.checks over the staged variant directory,
    under build_policy's policy (which metadata_text recorded).

    `import_check=False` skips the import through `kernels` (kernel-builder's
    doGetKernelCheck = false); `import_child` is its interpreter, started ahead;
    `local_kernels` its kernel dependencies (LOCAL_KERNELS form).
    """
    policy, reason = build_policy(redistributable)
    options = CheckOptions(
        policy=policy,
        policy_reason=reason,
        redistributable=redistributable,
        python=sys.executable,
        import_check=import_check,
        import_child=import_child,
        local_kernels=local_kernels,
    )
    report = run_checks(variant_dir, options)
    print(render_reports([report]), flush=True)
    if not report.ok:
        raise BuildError(f"{variant_dir.name}: the post-build checks failed (see above)")


def _kernel_dependencies(variant: PlanVariant, variant_name: str, given: str | None) -> str | None:
    """The LOCAL_KERNELS value the variant's import check resolves its kernel
    dependencies with: `given`, else their folders fetched now."""
    deps = variant.kernel_deps
    if deps is None:
        return None
    if deps.error is not None:
        raise UserError.single(f"cannot build {variant_name}: {deps.error}")
    return given if given is not None else local_kernels_value(fetch_kernel_deps(deps.kernels))


def _remove_bytecode(variant_dir: Path) -> None:
    for cache in sorted(variant_dir.rglob("__pycache__"), reverse=True):
        shutil.rmtree(cache)


@contextmanager
def _work_dir(work_dir: Path | None) -> Iterator[Path]:
    if work_dir is not None:
        work_dir.mkdir(parents=True, exist_ok=True)
        yield work_dir
        return
    with tempfile.TemporaryDirectory(prefix="kernelnix-build-") as temporary:
        yield Path(temporary)


def build_variant(
    plan: Plan,
    system: str,
    variant_name: str,
    source_dir: Path,
    out_dir: Path,
    *,
    unique_id: str | None = None,
    kernel_git: str | None = None,
    toolchain: str = "host",
    redistributable: bool = False,
    jobs: int | None = None,
    work_dir: Path | None = None,
    import_check: bool = True,
    glibc_target: Path | None = None,
    local_kernels: str | None = None,
    prebuilt: Prebuilt | None = None,
) -> Path:
    """Build one variant of `plan` into `out_dir/<variant_name>/` and return that path.

    `glibc_target`: the sysroot of an assembled glibc target
    (kernelnix.host.glibc_target) the compiles and the link use; a Linux variant
    built for publishing (`redistributable`) by the host compilers needs it.

    `unique_id` replaces the plan's (new ops id and metadata id), `kernel_git`
    its kernel commit (see apply_kernel_revision). `local_kernels`: the folders
    of the variant's kernel dependencies (LOCAL_KERNELS form, as the flake fetched
    them); None: downloaded through huggingface_hub's cache. `work_dir`
    keeps the CMake project and build tree (incremental rebuilds); without it
    they live in a temporary directory that is removed afterwards. `prebuilt`: the
    objects were compiled by earlier steps, and are linked here.
    """
    if unique_id is not None:
        plan = apply_unique_id(plan, unique_id)
    if kernel_git is not None:
        plan = apply_kernel_revision(plan, kernel_git)
    variant = plan.variant(system, variant_name)
    reason = why_not_buildable(variant, locked_wheels=False)
    if reason:
        raise UserError.single(f"cannot build {variant_name} on this machine: {reason}")
    if import_check:
        require_python_depends(variant, variant_name)
        local_kernels = _kernel_dependencies(variant, variant_name, local_kernels)
    metadata = metadata_text(variant, toolchain, redistributable, build_policy(redistributable)[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    destination = out_dir / variant_name
    # The variant directory is staged only after the compile: a build killed
    # while compiling leaves nothing in out_dir.
    glibc = read_glibc_target(glibc_target) if glibc_target else None
    compiled = (
        nullcontext(None)
        if variant.kind == "noarch"
        else _linked(plan, system, variant_name, prebuilt, source_dir, work_dir, metadata, glibc)
        if prebuilt
        else _compiled(
            plan,
            system,
            variant_name,
            source_dir,
            work_dir,
            metadata,
            jobs,
            redistributable,
            glibc,
        )
    )
    # The import check's interpreter imports Torch while the variant compiles.
    import_child = (
        ImportChild(sys.executable, local_kernels=local_kernels) if import_check else None
    )
    with (
        import_child or nullcontext(),
        compiled as build,
        replacing_dir(destination) as target,
    ):
        if build is None:
            _stage_noarch(plan, source_dir, target, metadata)
        else:
            _install(build, target, variant, strip=redistributable)
        run_post_build_checks(target, redistributable, import_check, import_child, local_kernels)
        _remove_bytecode(target)
    return destination
