"""What `kernelnix build` says of a build object by object (docs/distributed.md):
how many objects it will build and where, before it starts, and a line per
finished object, from Nix's machine-readable log (`--log-format internal-json`),
which also carries what Nix would have printed (its messages, and with -L the
build logs).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from kernelnix.plan.units import GPU_SUFFIXES, suffix

# Nix's activity and result types (src/libutil/logging.hh).
BUILD_ACTIVITY = 105
BUILD_LOG_LINE = 101
# Nix's verbosity of its default output (lvlInfo): the messages it prints.
SHOWN_LEVEL = 3
WILL_BE_BUILT = re.compile(r"^\s+(/nix/store/[a-z0-9]{32}-\S+\.drv)$", re.MULTILINE)
JSON_LINE = "@nix "
# A terminal's colour or style sequence, which Nix writes into its messages.
COLOUR = re.compile(r"\x1b\[[0-9;]*m")


@dataclass(frozen=True)
class ObjectStep:
    """An object derivation: the source it compiles, of which variant, into which
    store path, and the GPU archs of the kernels that list it (`8.0 9.0a`; empty
    for a CPU kernel's source or the binding)."""

    source: str
    variant: str
    output: str
    archs: str = ""


def without_colours(text: str) -> str:
    return COLOUR.sub("", text)


def derivations_to_build(dry_run: str) -> list[str]:
    """The derivations `nix build --dry-run` says it will build (its stderr)."""
    listed = dry_run.partition("will be built:")[2].partition("will be fetched")[0]
    return WILL_BE_BUILT.findall(listed)


def object_steps(derivations: dict[str, dict[str, object]]) -> dict[str, ObjectStep]:
    """The object derivations among `derivations` (`nix show-derivation`'s JSON)."""
    steps = {}
    for path, derivation in derivations.items():
        env = derivation.get("env")
        if isinstance(env, dict) and env.get("kernelnixStep") == "object":
            steps[path] = ObjectStep(
                str(env["objectSource"]),
                str(env["variant"]),
                str(env["out"]),
                str(env.get("objectArchs", "")),
            )
    return steps


def where_text(max_jobs: int | None, builders: str) -> str:
    """Where Nix will build: here, on its builders (Nix's `builders`: machines, or
    `@FILE` of them, one a line), or both."""
    if builders.startswith("@"):
        listed = Path(builders[1:])
        builders = listed.read_text() if listed.is_file() else ""
    machines = [
        m.split()[0] for m in re.split(r"[;\n]", builders) if m.strip() and not m.startswith("#")
    ]
    if not machines:
        return "on this machine"
    remote = f"on {len(machines)} builder{'s' if len(machines) > 1 else ''} ({', '.join(machines)})"
    return remote if max_jobs == 0 else f"on this machine and {remote}"


@dataclass(frozen=True)
class ObjectRoots:
    """Garbage-collector roots of finished objects, one link each under `folder`
    (`result-objects` beside the out-link): `<variant>/<source>.o`. A build stopped
    halfway then resumes even after a garbage collection, the next edit still
    compiles one object, and an edited object's new root replaces its old one."""

    folder: Path

    def keep(self, step: ObjectStep) -> str | None:
        """Root `step`'s output; a line saying why not where Nix refuses."""
        link = self.folder / step.variant / f"{step.source}.o"
        link.parent.mkdir(parents=True, exist_ok=True)
        command = [shutil.which("nix-store") or "nix-store", "--realise", step.output]
        done = subprocess.run(
            [*command, "--add-root", str(link)], capture_output=True, text=True, check=False
        )
        if done.returncode == 0:
            return None
        # Nix's last line is its error; those before it list the paths again.
        why = (done.stderr.strip().splitlines() or ["nix-store failed"])[-1]
        return f"kernelnix: {step.source} not kept from garbage collection: {why}\n"


@dataclass
class ObjectProgress:
    """Turns Nix's internal-json log back into its output, and adds
    `[k/N] source (archs) 74 s on machine` as each object finishes (the variant
    named too where the build has objects of several; see `label`)."""

    steps: dict[str, ObjectStep]
    print_logs: bool
    # Nix's colours kept in its messages: for a terminal, as Nix shows them there.
    colours: bool = False
    clock: Callable[[], float] = time.monotonic
    exists: Callable[[str], bool] = os.path.exists
    # Roots the object as it finishes (ObjectRoots.keep): a line to show, or None.
    keep: Callable[[ObjectStep], str | None] = lambda step: None
    started: dict[int, tuple[str, str, float]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)
    done: int = 0

    def __call__(self, line: str) -> str | None:
        """What to print for one line of Nix's stderr (None: nothing)."""
        if not line.startswith(JSON_LINE):
            return line
        try:
            event = json.loads(line[len(JSON_LINE) :])
        except json.JSONDecodeError:
            return line
        action = event.get("action")
        if action == "msg":
            if event.get("level", 0) > SHOWN_LEVEL:
                return None
            return f"{event['msg'] if self.colours else without_colours(event['msg'])}\n"
        if action == "start" and event.get("type") == BUILD_ACTIVITY:
            drv, machine = (event.get("fields") or ["", ""])[:2]
            self.started[event["id"]] = (drv, machine, self.clock())
            self.names[event["id"]] = _name(drv)
            return f"{event['text']}\n" if event.get("text") else None
        if action == "result" and event.get("type") == BUILD_LOG_LINE and self.print_logs:
            return f"{self.names.get(event['id'], '')}> {event['fields'][0]}\n"
        if action == "stop" and event["id"] in self.started:
            return self._finished(*self.started.pop(event["id"]))
        return None

    def _finished(self, drv: str, machine: str, start: float) -> str | None:
        step = self.steps.get(drv)
        # A failed object stops too; Nix's error says so.
        if step is None or not self.exists(step.output):
            return None
        self.done += 1
        on = f" on {machine}" if machine else ""
        seconds = self.clock() - start
        label = self.label(step)
        line = f"[{self.done}/{len(self.steps)}] {step.source}{label} {seconds:.0f} s{on}\n"
        return line + (self.keep(step) or "")

    def label(self, step: ObjectStep) -> str:
        """` (9.0)`: the archs of a GPU source; its variant too where the build has
        objects of several (a bundle), for the same source may be compiled by
        each; the variant alone for a C++ source (a CUDA kernel's host code too)."""
        several = len({s.variant for s in self.steps.values()}) > 1
        parts = [step.archs] if step.archs and suffix(step.source) in GPU_SUFFIXES else []
        if several or not parts:
            parts.append(step.variant)
        return f" ({', '.join(parts)})"


def _name(drv: str) -> str:
    """A derivation's name, as Nix prefixes its log lines."""
    return drv.rpartition("/")[2][33:].removesuffix(".drv")
