"""A conformance sweep: every kernels-community kernel with a CUDA backend, built
by `kernelnix build --local` as one variant for one development arch, with the
post-build checks and the import of the kernel in its own Torch.

Heavy (hours on two cores) and not part of the default run: `benchmarks/run
--only conformance`, or this file alone. Per kernel, smallest CUDA sources first:

1. its folder is extracted from the kernels-community git snapshot
   (`$KERNELNIX_COMMUNITY_GIT`, a git directory) into the work directory;
2. the variant: `torch214-cxx11-cu130-x86_64-linux`, else the kernel's stable-ABI
   CUDA 13.0 variant (a kernel built for the Torch stable ABI has no other). A
   kernel whose flags pin a C++ standard older than C++20 (`-std=c++17` in its
   cuda-flags, which come after the build's own standard, in kernel-builder too)
   cannot build against Torch 2.14, whose headers stop with `#error` below C++20:
   it gets the newest Torch variant before 2.14 (`torch213-cxx11-cu130`), whose
   headers need C++17, and the table says so;
3. the archs: `9.0`, plus, for a CUDA kernel planned without any 9.0, its first
   planned arch (`--cuda-archs` refuses a kernel it would leave empty);
4. `kernelnix build --local DIR --variant V --cuda-archs A -j 2 --no-progress`,
   its output in `<work>/logs/<kernel>.log`, in a process group of its own that is
   killed when the cap (30 minutes by default) runs out.

The outcome of each kernel (result, seconds, the first error of its log and
whose it is) goes to a JSON state file in the work directory, so that a run
resumes where the last one stopped: a recorded kernel is skipped unless named by
`--redo` (or `$KERNELNIX_CONFORMANCE_REDO`, comma-separated, `all` for every
kernel). After each kernel, docs/conformance.md is rewritten from the state.

Header dependencies (CUTLASS) are passed as `KERNELNIX_DEP_<NAME>` for every
`<deps>/cutlass-X.Y.Z/include` (`--deps`, default `<work>/deps`) whose version
is the one a dependency names; `git archive vX.Y.Z include tools/util/include`
of CUTLASS's repository gives such a folder. A kernel's `python-depends` come
with the locked wheels, as kernelnix builds them.

Run: python benchmarks/bench_conformance.py [--kernel NAME]... [--redo NAME]...
     [--cap-minutes N] [--stop-at HH:MM] [--work DIR]
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from figures import Figure, Unavailable

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "conformance.md"
WORK = Path(
    os.environ.get("KERNELNIX_CONFORMANCE_DIR", Path.home() / ".cache" / "kernelnix-conformance")
)
COMMUNITY_GIT = Path(
    os.environ.get("KERNELNIX_COMMUNITY_GIT", "/work/.mirror/huggingface+kernels-community/repo")
)
SYSTEM = "x86_64-linux"
VARIANT = f"torch214-cxx11-cu130-{SYSTEM}"
STABLE_VARIANT = re.compile(rf"torch-stable-abi\d+-cu130-{SYSTEM}")
# Torch 2.14's ATen.h requires C++20; 2.13's requires C++17.
CXX20_TORCH = (2, 14)
TORCH_VARIANT = re.compile(rf"torch(\d)(\d+)-cxx11-cu130-{SYSTEM}")
PINNED_STANDARD = re.compile(r"^-std=(?:c|gnu)\+\+(\d+)$")
DEVELOPMENT_ARCH = "9.0"
CAP_MINUTES = 30.0
HUGE_KERNELS = "<!-- huge kernels: benchmarks/bench_objects.py -->"
JOBS = 2

# The results, as the table writes them.
PASS = "pass"
FAIL = "fail"
TIMEOUT = "timeout"
STOPPED = "stopped"
NOT_BUILT = "not built"  # no variant this machine can build (no CUDA 13.0 one)

KERNELNIX = "kernelnix"
SOURCES = "the kernel's sources"
MACHINE = "this machine"
UNKNOWN = "not yet judged"

# Verdicts on failures after reading their logs, by kernel: (whose, the reason in
# plain words). Applied when the kernel's recorded first error contains the key's
# text, so that a new, different error is judged again.
_CXX17 = (
    "its cuda-flags set -std=c++17, and Torch 2.14's headers require C++20 (ATen.h "
    "stops with #error); kernel-builder also applies a kernel's cuda-flags after the "
    "language standard, so Torch 2.14 refuses it there too"
)
OLDER_TORCH = (
    "built against Torch 2.13: its flags pin -std=c++17, and Torch 2.14's headers require "
    "C++20 (ATen.h stops with #error); kernel-builder applies a kernel's cuda-flags after "
    "the language standard too, so its Torch 2.14 variant fails there as well"
)
# Notes on a passing kernel's row, by kernel: what its time does not say.
NOTES: dict[str, str] = {
    "layer-norm": "its first build (2026-11-27) reached the 30-minute cap a few steps "
    "before the link; this time is the next one, from ccache: about 34 min in all",
    "flash-mla": "kernelnix's, fixed: its first build (24.0 min) compiled the three sources "
    "both its kernels list once per kernel, and the link failed on their symbols, defined "
    "twice; now such a source compiles once, with both kernels' flags, as in kernel-builder. "
    "This time is the build after the fix, its other objects from ccache",
    "sage-attention": "its first build against Torch 2.13 was stopped at 21 min, 7 of 14 "
    "steps done, and started again with a 45-minute cap; this time is the second, the first "
    "seven objects from ccache: about 40 min in all",
}
REVIEWED: dict[str, tuple[str, str, str]] = {
    "megablocks": (
        "numpy: imported when the kernel loads",
        SOURCES,
        "a real violation: _layers/dmoe.py and four other modules import numpy when "
        "it loads, and numpy is neither required by Torch or the loader nor in its "
        "python-depends: where numpy is missing, the kernel does not load",
    ),
    "mamba-ssm": (
        "No module named 'transformers'",
        SOURCES,
        "a real violation: utils/generation.py and utils/hf.py import transformers when "
        "it loads, and it is not among its python-depends (nor required by Torch or the "
        "loader), so the import fails",
    ),
    "natten": (
        "C++20 or later compatible compiler is required",
        SOURCES,
        _CXX17 + "; recorded before the sweep built such kernels against Torch 2.13, and not "
        "built again (177 sources, 14763 KiB of them: far beyond the cap on two cores)",
    ),
    "sage-attention": (
        "C++20 or later compatible compiler is required",
        SOURCES,
        _CXX17,
    ),
}


@dataclass
class Outcome:
    kernel: str
    result: str
    seconds: float
    variant: str = ""
    archs: str = ""
    error: str = ""  # the first error line of the log
    whose: str = ""
    reason: str = ""
    finished: str = field(default_factory=lambda: _now().isoformat(timespec="seconds"))


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.timezone.utc)


# --- which kernels -------------------------------------------------------------


def source_size(directory: Path, sources: Iterable[str]) -> int:
    """Bytes of `sources` (files, or folders walked) under `directory`."""
    total = 0
    for source in sources:
        path = directory / source
        if path.is_file():
            total += path.stat().st_size
        elif path.is_dir():
            total += sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return total


def cuda_kernels(root: Path) -> list[tuple[str, int]]:
    """(name, bytes of CUDA sources) of each kernel under `root` that compiles CUDA
    code, as kernelnix's config loader reads its build.toml; smallest first."""
    from kernelnix.config import load_config

    found = []
    for directory in sorted(p for p in root.iterdir() if (p / "build.toml").is_file()):
        try:
            config = load_config(directory).config
        except Exception as exc:  # a build.toml kernelnix cannot read: say so, go on
            print(f"{directory.name}: build.toml not loaded: {exc}", flush=True)
            continue
        kernels = config.kernels_for("cuda")
        if config.framework == "torch-noarch" or not kernels:
            continue
        size = source_size(directory, [s for k in kernels.values() for s in k.src])
        found.append((directory.name, size))
    return sorted(found, key=lambda item: (item[1], item[0]))


def extract(kernel: str, destination: Path, git_dir: Path = COMMUNITY_GIT) -> Path:
    """`kernel`'s folder of the snapshot, fresh, under `destination`."""
    target = destination / kernel
    if target.exists():
        subprocess.run(["rm", "-rf", str(target)], check=True)
    destination.mkdir(parents=True, exist_ok=True)
    archive = subprocess.run(
        ["git", "--git-dir", str(git_dir), "archive", "HEAD", kernel],
        check=True,
        capture_output=True,
    )
    subprocess.run(["tar", "-x", "-C", str(destination)], input=archive.stdout, check=True)
    return target


# --- what to build ---------------------------------------------------------------


def choose_variant(names: Iterable[str], standard: int | None = None) -> str | None:
    """The variant the sweep builds among a kernel's planned ones, None if none fits;
    `standard`: the C++ standard the kernel's flags pin, if they do."""
    names = list(names)
    if standard is not None and standard < 20:
        older = [
            (version, name)
            for name in names
            if (found := TORCH_VARIANT.fullmatch(name))
            and (version := (int(found[1]), int(found[2]))) < CXX20_TORCH
        ]
        if older:
            return max(older)[1]
    if VARIANT in names:
        return VARIANT
    stable = sorted(n for n in names if STABLE_VARIANT.fullmatch(n))
    return stable[-1] if stable else None


def pinned_standard(kernels: Mapping[str, Mapping[str, Any]]) -> int | None:
    """The oldest C++ standard (17 for `-std=c++17`) that the plan's kernel sections
    pin in their cuda-flags or cxx-flags, None when none pins one."""
    pinned = [
        int(found[1])
        for kernel in kernels.values()
        for key in ("cuda-flags", "cxx-flags")
        for flag in kernel.get(key) or []
        if (found := PINNED_STANDARD.match(str(flag)))
    ]
    return min(pinned, default=None)


def _base(arch: str) -> str:
    return re.sub(r"[a-z+].*$", "", arch.removesuffix("+PTX"))


def choose_archs(kernels: Mapping[str, Sequence[str] | None]) -> list[str]:
    """`9.0`, and the first planned arch of each kernel planned without a 9.0."""
    archs = [DEVELOPMENT_ARCH]
    for planned in kernels.values():
        planned = list(planned or [])
        if planned and DEVELOPMENT_ARCH not in {_base(a) for a in planned}:
            first = planned[0]
            if first not in archs:
                archs.append(first)
    return archs


# --- reading a log ---------------------------------------------------------------

_ERROR = re.compile(
    r"(\berror\b\s*:|\berror\b [A-Z]\d+|fatal error|nvcc fatal|CMake Error|^FAIL\s|"
    r"Traceback \(most recent call last\)|^\S*Error: |Segmentation fault|Killed)",
    re.IGNORECASE,
)
_NOISE = re.compile(r"-Werror|error_|errors?\.(h|hpp|cpp|cuh)|Werror=|error-limit", re.IGNORECASE)


# A violation in the post-build checks' report (`    [import] ...`; notes say `note [`).
_VIOLATION = re.compile(r"^\s+\[[a-z][\w-]*\] ")


def first_error(log: str) -> str:
    """The first line of `log` that reports an error, trimmed; '' when none does. A
    failed check is named by its first violation rather than by the summary line."""
    lines = log.splitlines()
    for index, line in enumerate(lines):
        if line.startswith("FAIL  "):
            violations = [v.strip() for v in lines[:index] if _VIOLATION.match(v)]
            return _trimmed(violations[0] if violations else line)
        if _ERROR.search(line) and not _NOISE.search(_ERROR.sub("", line, count=1)):
            if line.startswith("+ "):  # an echoed command naming an error flag
                continue
            return _trimmed(line)
    return ""


def _trimmed(line: str) -> str:
    text = line.strip()
    return text if len(text) <= 400 else text[:397] + "..."


def build_steps(log: str) -> str:
    """How far Ninja got, from its last `[done/total]` line: ', 12 of 405 build steps'."""
    steps = re.findall(r"^\[(\d+)/(\d+)\]", log, re.MULTILINE)
    return f", {steps[-1][0]} of {steps[-1][1]} build steps done" if steps else ""


def classify(log: str, error: str) -> tuple[str, str]:
    """(whose, reason) of a failed build, from its first error and its log; a guess
    that REVIEWED overrides once a person has read the log."""
    text = error or log[-2000:]
    if re.search(r"Unsupported gpu architecture|unsupported .*arch", text, re.IGNORECASE):
        return MACHINE, "an arch that nvcc 13 lacks"
    if re.search(r"no CUDA GPU|CUDA driver|no kernel image|cudaErrorNoDevice", text):
        return MACHINE, "needs a GPU"
    if re.search(r"dependency .*(has no|not found|is CUTLASS)|KERNELNIX_DEP_", text):
        return MACHINE, "a header dependency not obtainable here"
    if re.search(r"is not locked|no wheel|not offered", text):
        return MACHINE, "no locked wheels for the variant on this machine"
    if "/project/kernel/" in text or re.search(r"\.(cu|cuh|cpp|h|hpp)\(\d+\)", text):
        return UNKNOWN, "a compile error in the kernel's sources or its headers"
    if re.search(r"^FAIL\s|violation", text):
        return UNKNOWN, "a post-build check fails"
    if "CMake Error" in text or text.startswith("error:"):
        return UNKNOWN, "kernelnix refused or failed to configure"
    return UNKNOWN, "see the log"


def judged(outcome: Outcome) -> Outcome:
    """`outcome` with a reviewed verdict where one applies (a copy)."""
    review = REVIEWED.get(outcome.kernel)
    if review and outcome.result == FAIL and review[0] in outcome.error:
        return dataclasses.replace(outcome, whose=review[1], reason=review[2])
    return outcome


# --- state and table -------------------------------------------------------------


def read_state(path: Path) -> dict[str, Outcome]:
    if not path.is_file():
        return {}
    data = json.loads(path.read_text())
    return {name: Outcome(**entry) for name, entry in data.get("kernels", {}).items()}


def write_state(path: Path, outcomes: Mapping[str, Outcome]) -> None:
    from kernelnix.core.fileio import write_atomic

    document = {"kernels": {name: asdict(o) for name, o in sorted(outcomes.items())}}
    write_atomic(path, json.dumps(document, indent=2) + "\n")


def minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min" if seconds >= 60 else f"{seconds:.0f} s"


def _cell(text: str) -> str:
    # A path into a locked environment reads from the environment's root: `torch/include/...`.
    text = re.sub(r"/\S*/kernelnix/environments/[^/\s]+/", "", text)
    return text.replace("|", "\\|").replace("\n", " ").strip() or "-"


def render_table(
    kernels: Sequence[tuple[str, int]], outcomes: Mapping[str, Outcome], snapshot: str
) -> str:
    """docs/conformance.md: every kernel in sweep order, recorded or not."""
    passed = sum(outcomes[k].result == PASS for k, _ in kernels if k in outcomes)
    lines = [
        "# Conformance: kernels-community's CUDA kernels",
        "",
        "Written by `benchmarks/run --only conformance` (`benchmarks/bench_conformance.py`;",
        "docs/performance.md says how to run and resume it); do not edit by hand.",
        f"Each kernel of kernels-community (snapshot {snapshot}) with a CUDA backend,",
        "as kernelnix's config loader reads its build.toml, smallest CUDA sources first:",
        f"`kernelnix build --local` of `{VARIANT}` (else the kernel's stable-ABI",
        "CUDA 13.0 variant; a kernel whose flags pin C++17, which Torch 2.14's headers",
        "refuse, `torch213-cxx11-cu130`)",
        f"for arch {DEVELOPMENT_ARCH} (plus a kernel's first arch where it",
        "has no 9.0), its Torch from the locked wheels, `-j 2`, ccache on,",
        "on a 2-core machine without a GPU; the post-build checks and the import of the",
        "kernel in its own Torch. `pass`: built, no violations, imported. A time is",
        "shorter where ccache held objects of an earlier build on this machine (a kernel",
        "the tests build too, or one built again after a fix).",
        "",
        f"**{passed} of {len(kernels)}** pass.",
        "",
        "| kernel | CUDA sources | result | time | variant, archs | first error | whose: why |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, size in kernels:
        outcome = outcomes.get(name)
        if outcome is not None:
            outcome = judged(outcome)
        if outcome is None:
            lines.append(f"| {name} | {size // 1024} KiB | not run yet | - | - | - | - |")
            continue
        whose = f"{outcome.whose}: {outcome.reason}" if outcome.whose else outcome.reason
        if outcome.result == PASS and name in NOTES:
            whose = NOTES[name]
        if TORCH_VARIANT.fullmatch(outcome.variant) and outcome.variant != VARIANT:
            whose = "; ".join(filter(None, [OLDER_TORCH, whose]))
        where = f"`{outcome.variant}` {outcome.archs}" if outcome.variant else "-"
        error = f"`{_cell(outcome.error).replace('`', chr(39))}`" if outcome.error else "-"
        lines.append(
            f"| {name} | {size // 1024} KiB | {outcome.result} | {minutes(outcome.seconds)} "
            f"| {_cell(where)} | {error} | {_cell(whose)} |"
        )
    return "\n".join(lines) + "\n"


def write_table(
    kernels: Sequence[tuple[str, int]],
    outcomes: Mapping[str, Outcome],
    snapshot: str,
    path: Path = TABLE,
) -> None:
    from kernelnix.core.fileio import write_atomic

    # The huge kernels' part below the table is bench_objects.py's: kept as it is.
    kept = path.read_text().partition(HUGE_KERNELS)[1:] if path.exists() else ("", "")
    table = render_table(kernels, outcomes, snapshot)
    write_atomic(path, table + (f"\n{kept[0]}{kept[1]}" if kept[0] else ""))


# --- one kernel -----------------------------------------------------------------


def dependency_environment(deps: Path) -> dict[str, str]:
    """KERNELNIX_DEP_<NAME> for each header dependency whose release is under `deps`."""
    from kernelnix.compile.dependencies import environment_variable, header_version
    from kernelnix.plan.dependencies import header_dependencies

    env: dict[str, str] = {}
    if not deps.is_dir():
        return env
    folders = sorted(deps.glob("*/include"))
    for key, dependency in header_dependencies().items():
        for include in folders:
            found = header_version(include, dependency)
            if found is not None and found.major_minor() == dependency.version.major_minor():
                env[environment_variable(key)] = str(include)
    return env


def planned(directory: Path, work: Path) -> tuple[str | None, list[str]]:
    """(the variant to build, its archs) from `kernelnix plan` of `directory`."""
    plan = work / "plan.json"
    subprocess.run(
        ["kernelnix", "plan", str(directory), "-o", str(plan), "--unique-id", "conformance"],
        check=True,
        capture_output=True,
        text=True,
    )
    document = json.loads(plan.read_text())
    variants = document["variants"].get(SYSTEM, {})
    variant = choose_variant(variants, pinned_standard(document.get("kernels", {})))
    if variant is None:
        return None, []
    return variant, choose_archs(variants[variant]["kernels"])


def run_capped(command: Sequence[str], log: Path, cap: float, env: Mapping[str, str]) -> int | None:
    """Run `command` in a new process group, output to `log`; its exit status, or None
    when `cap` seconds ran out first and the group was killed."""
    with log.open("w") as out:
        process = subprocess.Popen(
            list(command), stdout=out, stderr=subprocess.STDOUT, env=dict(env),
            start_new_session=True,
        )  # fmt: skip
        try:
            return process.wait(timeout=cap)
        except subprocess.TimeoutExpired:
            for sig in (signal.SIGTERM, signal.SIGKILL):
                try:
                    os.killpg(process.pid, sig)
                except ProcessLookupError:
                    break
                try:
                    process.wait(timeout=15)
                    break
                except subprocess.TimeoutExpired:
                    continue
            process.wait()
            return None


def build_one(kernel: str, work: Path, cap: float, deadline: float | None, deps: Path) -> Outcome:
    directory = extract(kernel, work / "kernels")
    try:
        variant, archs = planned(directory, work)
    except subprocess.CalledProcessError as exc:
        error = first_error(exc.stderr) or exc.stderr.strip().splitlines()[0]
        return judged(Outcome(kernel, FAIL, 0.0, error=error, whose=UNKNOWN, reason="plan"))
    if variant is None:
        return Outcome(
            kernel, NOT_BUILT, 0.0, whose=MACHINE,
            reason="no CUDA 13.0 variant: its build.toml caps CUDA below 13, and nvcc 13 "
            "and PyPI's Torch wheels (cu130) are all this machine has",
        )  # fmt: skip
    logs = work / "logs"
    logs.mkdir(parents=True, exist_ok=True)
    log = logs / f"{kernel}.log"
    command = [
        "kernelnix", "build", "--local", str(directory), "--variant", variant,
        "--cuda-archs", ",".join(archs), "-j", str(JOBS), "--no-progress",
    ]  # fmt: skip
    env = {**os.environ, "HF_HUB_OFFLINE": "1", **dependency_environment(deps)}
    limit = cap if deadline is None else max(60.0, min(cap, deadline - time.time()))
    start = time.monotonic()
    status = run_capped(command, log, limit, env)
    seconds = time.monotonic() - start
    outcome = Outcome(kernel, PASS, seconds, variant, ",".join(archs))
    return outcome_of(outcome, status, log.read_text(errors="replace"), cap, limit < cap)


def outcome_of(outcome: Outcome, status: int | None, log: str, cap: float, early: bool) -> Outcome:
    """The outcome of a build from its exit status (None: killed at the cap, which was
    cut short by the session's end when `early`) and its log."""
    error = first_error(log)
    minutes_run = f"{outcome.seconds / 60:.0f} min"
    if status is None and not error:
        outcome.result = STOPPED if early else TIMEOUT
        lowered = "" if cap == CAP_MINUTES * 60 else f", below the default {CAP_MINUTES:.0f}"
        outcome.reason = (
            f"stopped at {minutes_run} (session ended)"
            if early
            else f"timeout at {minutes_run} (cap {cap / 60:.0f} min{lowered})"
        ) + build_steps(log)
        return outcome
    variant = re.escape(outcome.variant)
    imported = re.search(rf"^{variant}  \[.*\bimport\b.*\]$", log, re.MULTILINE)
    if status == 0 and imported and re.search(rf"^ok\s+{variant}:", log, re.MULTILINE):
        return outcome
    outcome.result = FAIL
    if status is None:  # an error before the cap: Ninja was still finishing another job
        error += f" (then stopped at the cap, {minutes_run})"
    error = error or (f"exit status {status}" if status else "no import check")
    outcome.error = re.sub(r"\S*/project/kernel/", "", error)
    outcome.whose, outcome.reason = classify(log, outcome.error)
    return judged(outcome)


# --- the sweep ------------------------------------------------------------------


def snapshot_commit(git_dir: Path = COMMUNITY_GIT) -> str:
    done = subprocess.run(
        ["git", "--git-dir", str(git_dir), "rev-parse", "--short=8", "HEAD"],
        capture_output=True, text=True, check=True,
    )  # fmt: skip
    return done.stdout.strip()


def resume(
    kernels: Sequence[tuple[str, int]],
    build: Callable[[str], Outcome],
    state_path: Path,
    write: Callable[[Mapping[str, Outcome]], None],
    redo: Iterable[str] = (),
    only: Iterable[str] = (),
    stop_at: datetime.datetime | None = None,
) -> dict[str, Outcome]:
    """Build, in order, each kernel the state at `state_path` has not recorded (or
    named in `redo`; `all`: every one), recording it and writing the table after each;
    no kernel starts after `stop_at`. The outcomes, recorded ones included."""
    outcomes = read_state(state_path)
    redo = set(redo)
    wanted = set(only)
    for name, size in kernels:
        if wanted and name not in wanted:
            continue
        if name in outcomes and "all" not in redo and name not in redo:
            continue
        if stop_at is not None and _now() >= stop_at:
            print(f"stop: no kernel starts after {stop_at:%H:%M} UTC", flush=True)
            break
        print(f"{_now():%H:%M:%S} {name} ({size // 1024} KiB of CUDA sources)", flush=True)
        outcome = build(name)
        print(
            f"    {outcome.result} in {minutes(outcome.seconds)}"
            + (f": {outcome.error}" if outcome.error else "")
            + (f" [{outcome.whose}: {outcome.reason}]" if outcome.whose else ""),
            flush=True,
        )
        outcomes[name] = outcome
        write_state(state_path, outcomes)
        write(outcomes)
    write(outcomes)
    return outcomes


def sweep(
    work: Path = WORK,
    cap_minutes: float = CAP_MINUTES,
    redo: Iterable[str] = (),
    only: Iterable[str] = (),
    stop_at: datetime.datetime | None = None,
    kill_at: datetime.datetime | None = None,
    deps: Path | None = None,
    table: Path = TABLE,
) -> tuple[list[tuple[str, int]], dict[str, Outcome]]:
    """Build every kernel not yet recorded (or named in `redo`; `all` for every one),
    recording each and rewriting the table; no kernel starts after `stop_at`, and a
    build still running at `kill_at` is stopped."""
    if not (COMMUNITY_GIT / "HEAD").is_file():
        raise Unavailable(f"no kernels-community git directory at {COMMUNITY_GIT}")
    snapshot = snapshot_commit()
    sources = work / "sources"
    for name in subprocess.run(
        ["git", "--git-dir", str(COMMUNITY_GIT), "ls-tree", "-d", "--name-only", "HEAD"],
        capture_output=True, text=True, check=True,
    ).stdout.split():  # fmt: skip
        if not (sources / name).is_dir():
            extract(name, sources)
    kernels = cuda_kernels(sources)
    outcomes = resume(
        kernels,
        lambda name: build_one(
            name,
            work,
            cap_minutes * 60,
            kill_at.timestamp() if kill_at is not None else None,
            deps or work / "deps",
        ),
        work / "state.json",
        lambda done: write_table(kernels, done, snapshot, table),
        redo=redo,
        only=only,
        stop_at=stop_at,
    )
    return kernels, outcomes


def _env_list(name: str) -> list[str]:
    return [v for v in os.environ.get(name, "").split(",") if v]


def _utc_today_at(text: str) -> datetime.datetime:
    hour, minute = (int(part) for part in text.split(":"))
    return _now().replace(hour=hour, minute=minute, second=0, microsecond=0)


def measure(
    cap_minutes: float | None = None, redo: Iterable[str] = (), only: Iterable[str] = ()
) -> list[Figure]:
    """The sweep, then one figure without a target: the time of the passing builds
    against the smallest kernel's (how many smallest-kernel builds the sweep costs)."""
    cap = cap_minutes or float(os.environ.get("KERNELNIX_CONFORMANCE_CAP_MINUTES", CAP_MINUTES))
    redo = [*redo, *_env_list("KERNELNIX_CONFORMANCE_REDO")]
    stop = os.environ.get("KERNELNIX_CONFORMANCE_STOP_AT")
    kill = os.environ.get("KERNELNIX_CONFORMANCE_KILL_AT")
    kernels, outcomes = sweep(
        cap_minutes=cap,
        kill_at=_utc_today_at(kill) if kill else None,
        redo=redo,
        only=[*only, *_env_list("KERNELNIX_CONFORMANCE_ONLY")],
        stop_at=_utc_today_at(stop) if stop else None,
    )
    passed = [outcomes[k] for k, _ in kernels if k in outcomes and outcomes[k].result == PASS]
    if not passed:
        raise Unavailable("no kernel passed yet; see docs/conformance.md")
    smallest = passed[0]
    return [
        Figure(
            name=f"conformance: {len(passed)} of {len(kernels)} kernels build, pass their "
            "checks and import (docs/conformance.md)",
            seconds=sum(o.seconds for o in passed),
            baseline=f"{smallest.kernel}'s build",
            baseline_seconds=smallest.seconds,
            target=None,
            target_text="none: the table is the result",
        )
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernel", action="append", default=[], help="only this kernel")
    parser.add_argument("--redo", action="append", default=[], help="build again (`all`)")
    parser.add_argument("--cap-minutes", type=float, default=CAP_MINUTES)
    parser.add_argument("--stop-at", help="HH:MM UTC: start no kernel after it")
    parser.add_argument("--kill-at", help="HH:MM UTC: stop a build still running then")
    parser.add_argument("--work", type=Path, default=WORK, help=f"default {WORK}")
    parser.add_argument("--deps", type=Path, help="CUTLASS releases (default <work>/deps)")
    args = parser.parse_args()
    kernels, outcomes = sweep(
        work=args.work,
        cap_minutes=args.cap_minutes,
        redo=[*args.redo, *_env_list("KERNELNIX_CONFORMANCE_REDO")],
        only=args.kernel,
        stop_at=_utc_today_at(args.stop_at) if args.stop_at else None,
        kill_at=_utc_today_at(args.kill_at) if args.kill_at else None,
        deps=args.deps,
    )
    passed = sum(outcomes[k].result == PASS for k, _ in kernels if k in outcomes)
    print(f"{passed} of {len(kernels)} pass; {TABLE}")


if __name__ == "__main__":
    main()
