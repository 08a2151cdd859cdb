"""Running Nix on a kernel project: the Nix side of `kernelnix build`,
`build-and-copy`, `devshell`, `testshell`, `list-variants --nix` and `reproduce`.

Each call first refreshes the generated files (kernelnix.project.generate), stages
those git does not track yet (`git add --intent-to-add`: flakes see only tracked
files), prints the command (`+ nix build ...`) and runs it. A flake.nix whose
`kernelnix` input is the default registry name gets the Nix library of this
kernelnix as that input (`--override-input`), so it builds with no `nix registry
add`. A failure Nix explains in a known way is explained once more in one line,
with the fix (kernelnix/data/nix-errors.json).
"""

from __future__ import annotations

import dataclasses
import json
import re
import shlex
import shutil
import subprocess
import sys
import threading
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import resources
from pathlib import Path

import click

from kernelnix.config import load_config
from kernelnix.core.diagnostics import Diagnostic, UserError
from kernelnix.core.process import shown
from kernelnix.emit.escape import nix_string
from kernelnix.emit.flake import DEFAULT_KERNELNIX_URL, FLAKE_FILE, pristine_settings
from kernelnix.host.kernel_deps import store_kernel_deps
from kernelnix.host.system import current_system
from kernelnix.host.toolchain_fetch import prefetch_toolchain
from kernelnix.plan.kernel_deps import kernel_deps_of
from kernelnix.project.generate import generate
from kernelnix.project.library import library_url
from kernelnix.project.objects import (
    ObjectProgress,
    ObjectRoots,
    ObjectStep,
    derivations_to_build,
    object_steps,
    where_text,
    without_colours,
)

# Harmless where nix.conf already enables them; needed where it does not.
NIX_FEATURES = ("--extra-experimental-features", "nix-command flakes")


@dataclass(frozen=True)
class NixOptions:
    """Options passed through to `nix build` / `nix run`; `archives`: binary caches
    that keep the fixed-output downloads (`kernelnix archive`), used where a
    registry no longer has a file."""

    print_build_logs: bool = False
    max_jobs: int | None = None
    cores: int | None = None
    archives: tuple[str, ...] = ()
    # Nix's `builders` (machines separated by `;`); None: nix.conf's.
    builders: str | None = None

    @property
    def given(self) -> bool:
        """Whether any option differs from Nix's defaults."""
        return self != NixOptions()

    def args(self) -> list[str]:
        logs = ["--print-build-logs"] if self.print_build_logs else []
        builders = [] if self.builders is None else ["--builders", self.builders]
        return logs + self.job_args() + builders

    def job_args(self) -> list[str]:
        """--max-jobs and --cores, which `nix` and `nix-store` both take."""
        args = []
        if self.max_jobs is not None:
            args += ["--max-jobs", str(self.max_jobs)]
        if self.cores is not None:
            args += ["--cores", str(self.cores)]
        return args


def nix_build_options(nix: NixOptions, jobs: int | None) -> NixOptions:
    """`kernelnix build`'s Nix options: its -j/--jobs is Nix's --cores."""
    if jobs is not None and nix.cores is not None and jobs != nix.cores:
        raise UserError.single(
            f"-j {jobs} and --cores {nix.cores} disagree (for Nix builds -j is --cores)",
            key="--cores",
            fix="pass one of them",
        )
    return dataclasses.replace(nix, cores=nix.cores if nix.cores is not None else jobs)


def nix_executable() -> str:
    nix = shutil.which("nix")
    if nix is None:
        raise UserError.single(
            "nix is not installed (no `nix` on PATH)",
            fix="install Nix, or build without it: kernelnix build --local",
        )
    return nix


def nix_command(*args: str) -> list[str]:
    return [nix_executable(), *NIX_FEATURES, *args]


@dataclass(frozen=True)
class FlakeProject:
    """A kernel directory Nix builds, and the arguments every Nix call on it takes:
    input overrides, and the archives its builds may substitute downloads from
    (the command line's and those the flake's nixConfig names)."""

    root: Path
    overrides: tuple[str, ...] = ()
    archives: tuple[str, ...] = ()

    def ref(self, attribute: str) -> str:
        return f"{self.root}#{attribute}"

    @property
    def substituters(self) -> tuple[str, ...]:
        """The archives as extra substituters: Nix checks what they serve of a
        fixed-output download by its hash (unsigned is fine)."""
        if not self.archives:
            return ()
        return ("--option", "extra-substituters", " ".join(self.archives))

    @property
    def nix_args(self) -> tuple[str, ...]:
        """What every `nix` command on the flake takes: input overrides, substituters."""
        return (*self.overrides, *self.substituters)


def flake_archives(root: Path) -> tuple[str, ...]:
    """The binary caches flake.nix names in nixConfig (extra-)substituters: Nix uses
    them for a plain `nix build` only with accept-flake-config; kernelnix passes them."""
    if not (root / FLAKE_FILE).is_file():
        return ()
    command = nix_command(
        "eval",
        "--json",
        "--file",
        str(root / FLAKE_FILE),
        "--apply",
        "flake: let c = flake.nixConfig or { }; in "
        "(c.substituters or [ ]) ++ (c.extra-substituters or [ ])",
    )
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        return ()
    found = json.loads(done.stdout)
    return tuple(found) if isinstance(found, list) else ()


@dataclass(frozen=True)
class NixErrorHint:
    """A failure Nix reports in a known way: what it means and how to fix it."""

    pattern: re.Pattern[str]
    meaning: str
    fix: str


@cache
def nix_error_hints() -> tuple[NixErrorHint, ...]:
    text = resources.files("kernelnix.data").joinpath("nix-errors.json").read_text()
    return tuple(
        NixErrorHint(re.compile(entry["pattern"]), entry["meaning"], entry["fix"])
        for entry in json.loads(text)["errors"]
    )


def explain_nix_error(stderr: str) -> Diagnostic | None:
    """The one-line explanation of a Nix failure, from the first known pattern in it
    (its colours aside: Nix's machine-readable log keeps them in its messages)."""
    plain = without_colours(stderr)
    for hint in nix_error_hints():
        found = hint.pattern.search(plain)
        if found:
            named = found.groupdict()
            meaning, fix = (t.format_map(named) if named else t for t in (hint.meaning, hint.fix))
            return Diagnostic(f"nix failed: {meaning}", fix=fix)
    return None


@dataclass(frozen=True)
class Finished:
    """A command run by `run_shown`: its status, its stdout (when captured) and the
    end of its stderr, where Nix says what failed."""

    returncode: int
    stdout: str
    tail: str


def run(
    command: Sequence[str],
    cwd: Path | None = None,
    capture: bool = False,
    shell: bool = False,
    render: Render | None = None,
) -> str:
    """Print `+ nix ...`, run it with its stderr passed through (each line as `render`
    turns it, when given); a failure exits with Nix's status, or with 2 and the
    explanation when Nix's message is a known one. An interactive `shell` keeps the
    terminal: its stderr is not read."""
    done = run_shown(command, cwd, capture, shell, render)
    if done.returncode != 0:
        explained = explain_nix_error(done.tail)
        if explained is None:
            sys.exit(done.returncode)
        raise UserError([explained])
    return done.stdout


# What to print for a line of Nix's stderr (None: nothing).
Render = Callable[[str], str | None]


def run_shown(
    command: Sequence[str],
    cwd: Path | None = None,
    capture: bool = False,
    shell: bool = False,
    render: Render | None = None,
) -> Finished:
    """Print the command, run it with its stderr passed through as it comes; whatever
    its status."""
    click.echo(shown(command), err=True)
    tail: deque[str] = deque(maxlen=400)  # the end is where Nix says what failed
    captured: list[str] = []
    with subprocess.Popen(
        list(command),
        cwd=cwd,
        text=True,
        stdout=subprocess.PIPE if capture else None,
        stderr=None if shell else subprocess.PIPE,
    ) as process:
        # Read beside stderr: a large output (show-derivation --recursive) would
        # otherwise fill its pipe and stop Nix while stderr is read to its end.
        reader = threading.Thread(
            target=lambda: captured.append(process.stdout.read() if process.stdout else "")
        )
        reader.start()
        for line in process.stderr or ():
            text = render(line) if render else line
            if text:
                sys.stderr.write(text)
                tail.append(text)
        reader.join()
    return Finished(process.returncode, "".join(captured), "".join(tail))


def _untracked(root: Path, names: list[str]) -> list[str]:
    """The files among `names` that git does not track, when `root` is in a git work tree."""
    inside = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--is-inside-work-tree"],
        capture_output=True,
        text=True,
        check=False,
    )
    if inside.returncode != 0:
        return []
    listed = subprocess.run(
        ["git", "-C", str(root), "ls-files", "--", *names],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    return [name for name in names if name not in listed]


def _require_tracked(root: Path, names: list[str]) -> None:
    missing = _untracked(root, names)
    if missing:
        raise UserError.single(
            f"git does not track {', '.join(missing)}, so Nix cannot see "
            f"{'it' if len(missing) == 1 else 'them'} (flakes read only tracked files)",
            file=str(root),
            fix=f"git -C {shlex.quote(str(root))} add {' '.join(missing)}",
        )


def _stage(root: Path, names: list[str]) -> None:
    """`git add --intent-to-add` the generated files git does not track yet, saying so."""
    missing = _untracked(root, names)
    if not missing:
        return
    subprocess.run(
        ["git", "-C", str(root), "add", "--intent-to-add", "--", *missing],
        capture_output=True,
        check=True,
    )
    click.echo(
        f"staged {', '.join(missing)} (git add --intent-to-add), so that Nix sees "
        f"{'it' if len(missing) == 1 else 'them'}; commit {'it' if len(missing) == 1 else 'them'} "
        "with your kernel",
        err=True,
    )


def input_overrides(root: Path) -> tuple[str, ...]:
    """`--override-input kernelnix <this kernelnix's flake>` for a generated flake.nix whose
    input is the registry name (an edited flake.nix keeps the input it names)."""
    flake = root / FLAKE_FILE
    settings = pristine_settings(flake.read_text()) if flake.is_file() else None
    if settings is None or settings.kernelnix_url != DEFAULT_KERNELNIX_URL:
        return ()
    return ("--override-input", "kernelnix", library_url())


def prepare(directory: Path, archives: Sequence[str] = ()) -> FlakeProject:
    """Refresh and stage the generated files; return the flake project Nix builds,
    with `archives` and those its flake.nix names.

    Nothing is written for a kernel git does not track, nor without Nix.
    """
    nix_executable()
    loaded = load_config(directory)
    root = loaded.path.parent.resolve()
    _require_tracked(root, [loaded.path.name])
    generated = generate(loaded)
    for note in generated.notes:
        click.echo(f"note: {note}", err=True)
    _stage(root, [w.path.name for w in generated.written])
    # Private dependencies too: kernelnix fetches them with HF_TOKEN, Nix cannot.
    store_kernel_deps(kernel_deps_of(generated.plan, current_system()))
    named = tuple(dict.fromkeys([*archives, *flake_archives(root)]))
    project = FlakeProject(root, input_overrides(root), named)
    if project.overrides:
        click.echo(f"note: flake input `kernelnix` is {project.overrides[-1]}", err=True)
    return project


def variants(project: FlakeProject, systems: Sequence[str] | None = None) -> dict[str, list[str]]:
    """The flake's `packages.<system>.variants` (kernel-builder's lists, which
    `nix eval .#variants` gives for this machine's system): system -> the
    variant names the flake builds, for `systems` (None: every system of the flake).
    """
    wanted = (
        "builtins.attrNames packages"
        if systems is None
        else "[ " + " ".join(nix_string(s) for s in systems) + " ]"
    )
    select = (
        "packages: builtins.listToAttrs (map (system: { name = system; "
        f"value = packages.${{system}}.variants or [ ]; }}) ({wanted}))"
    )
    command = nix_command(
        "eval", "--json", project.ref("packages"), *project.nix_args, "--apply", select
    )
    result: dict[str, list[str]] = json.loads(run(command, capture=True))
    return result


def flake_variants(directory: Path, systems: Sequence[str] | None) -> dict[str, list[str]]:
    """The flake's variants of `systems` (None: every system)."""
    return variants(prepare(directory), systems)


def _not_offered_reason(project: FlakeProject, system: str, variant: str) -> str:
    """Why the flake's toolchain leaves `variant` out (its `notOffered` output), as
    ": reason", or "" when the flake gives none (an older kernelnix, a typo)."""
    attribute = project.ref(f"notOffered.{system}")
    command = nix_command(
        "eval",
        "--json",
        attribute,
        *project.nix_args,
        "--apply",
        f"r: r.{nix_string(variant)} or null",
    )
    try:
        reason = json.loads(run(command, capture=True))
    except (UserError, SystemExit):  # no such output: the reason is only missing
        return ""
    return f": {reason}" if isinstance(reason, str) else ""


def require_offered(project: FlakeProject, *wanted: str) -> None:
    """UserError unless the flake builds every variant of `wanted` on this machine's system."""
    system = current_system()
    offered = variants(project, [system])[system]
    problems = [
        Diagnostic(
            f"the flake does not build variant {variant!r} on {system}"
            + _not_offered_reason(project, system, variant),
            fix="pick one of: " + (", ".join(offered) or "(none on this machine)"),
        )
        for variant in wanted
        if variant not in offered
    ]
    if problems:
        raise UserError(problems)


def build_with_nix(
    directory: Path, variant: str | None, unique_id: str | None, options: NixOptions
) -> Path:
    """`kernelnix build` without --local: `nix build` the bundle, or one variant
    (checked against the flake's variants), into DIRECTORY/result; the store path."""
    if unique_id is not None:
        raise UserError.single(
            "--unique-id applies to --local builds; Nix builds use the commit (self.shortRev)",
            key="--unique-id",
            fix="drop --unique-id, or add --local",
        )
    project = prepare(directory, options.archives)
    if variant is not None:
        require_offered(project, variant)
    result = project.root / "result"
    attribute = variant or "bundle"
    command = nix_command(
        "build",
        project.ref(attribute),
        *project.nix_args,
        *sandbox_options(project, attribute),
        "--out-link",
        str(result),
        *options.args(),
    )
    steps = objects_to_build(command)
    if steps:
        where = where_text(options.max_jobs, nix_builders(options))
        count = f"{len(steps)} object{'s' if len(steps) > 1 else ''}"
        click.echo(f"kernelnix: {count} to build, {where}", err=True)
        progress = ObjectProgress(
            steps,
            options.print_build_logs,
            colours=sys.stderr.isatty(),
            keep=ObjectRoots(project.root / "result-objects").keep,
        )
        run([*command, "--log-format", "internal-json"], render=progress)
    else:
        run(command)
    built = result.resolve()
    click.echo(f"{result} -> {built}")
    return built


def objects_to_build(command: list[str]) -> dict[str, ObjectStep]:
    """The object derivations (docs/distributed.md) the `nix build` of `command` would
    build: none where its variants build in one derivation each, or are built."""
    # Not shown: it lists every derivation, hundreds for a huge kernel.
    dry_run = subprocess.run([*command, "--dry-run"], capture_output=True, text=True)
    if dry_run.returncode != 0:
        return {}  # the build itself says why
    pending = [d for d in derivations_to_build(dry_run.stderr) if d.endswith(".o.drv")]
    if not pending:
        return {}
    return object_steps(json.loads(_quietly(nix_command("show-derivation", *pending))))


def nix_builders(options: NixOptions) -> str:
    """The builders Nix will use: --builders, else nix.conf's."""
    if options.builders is not None:
        return options.builders
    config = json.loads(_quietly(nix_command("show-config", "--json")))
    return str(config.get("builders", {}).get("value", ""))


def _quietly(command: list[str]) -> str:
    """The stdout of a Nix query kernelnix makes for its own report (not shown)."""
    return subprocess.run(command, capture_output=True, text=True, check=True).stdout


def sandbox_options(project: FlakeProject, attribute: str) -> tuple[str, ...]:
    """`--option sandbox true` when the flake's toolchain builds from the store
    alone (the hermetic one), else nothing: the host toolchain reads /usr and
    runs /bin/sh, which the sandbox hides. The one place that decides it: the
    builder of the derivation of `attribute` is a store path (the registry's
    shell) for the hermetic toolchain and /bin/sh for the host one
    (nix/lib/bundle.nix, nix/lib/variant.nix). For the hermetic toolchain its
    locked artifacts are fetched first (kernelnix.host.toolchain_fetch), so that a
    file gone from its server is one error naming the fix, not Nix's."""
    in_store = (
        "d: builtins.substring 0 (builtins.stringLength builtins.storeDir) d.builder"
        " == builtins.storeDir"
    )
    command = nix_command("eval", "--json", project.ref(attribute), *project.nix_args)
    hermetic = json.loads(run([*command, "--apply", in_store], capture=True))
    if not hermetic:
        return ()
    data = flake_kernelnix(project) / "kernelnix" / "data"
    prefetch_toolchain(
        current_system(),
        lambda line: click.echo(line, err=True),
        lock_file=data / "toolchain-lock.json",
        wheel_lock_file=data / "wheel-lock.json",
        archives=project.archives,
    )
    return ("--option", "sandbox", "true")


def flake_kernelnix(project: FlakeProject) -> Path:
    """The kernelnix the flake builds with (its input holding kernelnix's data: the
    one its flake.lock pins, or this kernelnix where it is overridden), whose locks
    name what the toolchain fetches; this kernelnix's where none is found."""
    command = nix_command("flake", "archive", "--json", "--dry-run", str(project.root))
    tree = json.loads(run([*command, *project.overrides], capture=True))
    pending = list(tree.get("inputs", {}).values())
    while pending:
        node = pending.pop(0)
        source = Path(node.get("path", "/"))
        if (source / "kernelnix" / "data" / "toolchain-lock.json").is_file():
            return source
        pending += list(node.get("inputs", {}).values())
    return Path(__file__).resolve().parents[2]


# `kernelnix devshell`/`testshell` -> the flake's shells of one variant, and the
# shell without --variant (that of the best variant, the plan's ci-order).
SHELLS = {"devshell": ("devShells", "default"), "testshell": ("testShells", "test")}


def shell_command(
    project: FlakeProject, shell: str, variant: str | None, options: NixOptions
) -> list[str]:
    """The `nix develop` command line of a kernel's dev or test shell."""
    per_variant, default = SHELLS[shell]
    attribute = f"{per_variant}.{variant}" if variant else default
    return nix_command("develop", project.ref(attribute), *project.nix_args, *options.args())


def enter_shell(directory: Path, shell: str, variant: str | None, options: NixOptions) -> None:
    """Run `nix develop` on the kernel's `shell` (devshell, testshell) in its directory."""
    project = prepare(directory, options.archives)
    if variant is not None:
        require_offered(project, variant)
    run(shell_command(project, shell, variant, options), cwd=project.root, shell=True)


def build_and_copy(directory: Path, options: NixOptions) -> None:
    """`nix run <root>#build-and-copy` in the kernel directory: the bundle into ./build."""
    project = prepare(directory, options.archives)
    command = nix_command("run", project.ref("build-and-copy"), *project.nix_args)
    run([*command, *options.args()], cwd=project.root)
