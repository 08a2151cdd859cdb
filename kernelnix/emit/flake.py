"""`kernelnix generate`: the files a kernel project's flake reads.

- `flake.nix`, rendered from kernelnix/templates/flake/flake.nix.j2. Its first line
  records the settings it was rendered with and the sha256 of the rest, so an
  edited flake.nix is recognised and kept unless `force` is given.
- `kernelnix-plan.json`: the build plan, written for Nix. Its unique id is a
  placeholder: the flake passes the commit (`self.shortRev`) to every build.
  nix/lib/plan.nix refuses a plan whose `build-toml-sha256` no longer matches.
- `kernelnix-host.json` (host toolchain only): this machine's Python, Torch and
  compilers (kernelnix.host.record).

Values reach flake.nix only through `nix_string`; everything from build.toml
reaches Nix through the plan's JSON.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kernelnix.config.load import LoadedConfig
from kernelnix.core.diagnostics import UserError
from kernelnix.core.fileio import write_atomic
from kernelnix.emit.escape import nix_string
from kernelnix.emit.render import render
from kernelnix.host.record import HOST_FILE, host_json, probe_host
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import PLAN_FILE, Plan
from kernelnix.variants.matrix import TOOLCHAINS, matrix_data

FLAKE_FILE = "flake.nix"
FLAKE_TEMPLATE = "flake/flake.nix.j2"
HEADER_PREFIX = "# kernelnix-generated: "
# The plan's unique id for Nix; every variant build replaces it with the revision.
NIX_UNIQUE_ID = "flake_rev"
DEFAULT_KERNELNIX_URL = "kernelnix"  # a flake registry name


@dataclass(frozen=True)
class FlakeSettings:
    kernelnix_url: str = DEFAULT_KERNELNIX_URL
    toolchain: str = "host"


@dataclass(frozen=True)
class Written:
    """What generate did with one file: wrote, unchanged or kept (edited by the author)."""

    path: Path
    action: str

    def describe(self) -> str:
        if self.action == "kept":
            return (
                f"kept {self.path}: edited since kernelnix generated it "
                "(pass --force to overwrite it)"
            )
        return f"{self.action} {self.path}"


def _digest(body: str) -> str:
    return hashlib.sha256(body.encode()).hexdigest()


def _binary_cache() -> dict[str, list[str]]:
    """matrix.json's binary cache of hermetic builds, as Nix string literals."""
    cache = matrix_data()["hermetic"]["binary-cache"]
    return {
        "substituters": [nix_string(url) for url in cache["substituters"]],
        "public_keys": [nix_string(key) for key in cache["trusted-public-keys"]],
    }


def render_flake(settings: FlakeSettings) -> str:
    """The text of flake.nix: the header line, then the rendered template."""
    if settings.toolchain not in TOOLCHAINS:
        raise UserError.single(
            f"unknown toolchain {settings.toolchain!r}", fix=f"use one of: {', '.join(TOOLCHAINS)}"
        )
    body = render(
        FLAKE_TEMPLATE,
        {
            "kernelnix_url": nix_string(settings.kernelnix_url),
            "toolchain": nix_string(settings.toolchain),
            "binary_cache": _binary_cache() if settings.toolchain == "hermetic" else None,
        },
    )
    header = {
        "kernelnix-url": settings.kernelnix_url,
        "toolchain": settings.toolchain,
        "sha256": _digest(body),
    }
    return HEADER_PREFIX + json.dumps(header, sort_keys=True) + "\n" + body


def pristine_settings(text: str) -> FlakeSettings | None:
    """The settings of a flake.nix kernelnix generated and nobody edited since, else None."""
    first, _, body = text.partition("\n")
    if not first.startswith(HEADER_PREFIX):
        return None
    try:
        header = json.loads(first[len(HEADER_PREFIX) :])
        if header["sha256"] != _digest(body):
            return None
        return FlakeSettings(str(header["kernelnix-url"]), str(header["toolchain"]))
    except (ValueError, KeyError, TypeError):
        return None


def nix_plan(loaded: LoadedConfig) -> Plan:
    """The plan the flake reads: deterministic, no git state, placeholder unique id."""
    return build_plan(loaded, PlanOptions(unique_id=NIX_UNIQUE_ID))


def _write_if_changed(path: Path, text: str) -> Written:
    if path.exists() and path.read_text(encoding="utf-8") == text:
        return Written(path, "unchanged")
    write_atomic(path, text)
    return Written(path, "wrote")


def _flake(
    directory: Path, url: str | None, toolchain: str | None, force: bool
) -> tuple[Written, FlakeSettings]:
    path = directory / FLAKE_FILE
    existing = path.read_text(encoding="utf-8") if path.exists() else None
    previous = pristine_settings(existing) if existing is not None else None
    base = previous or FlakeSettings()
    settings = FlakeSettings(url or base.kernelnix_url, toolchain or base.toolchain)
    if existing is not None and previous is None and not force:
        return Written(path, "kept"), settings
    return _write_if_changed(path, render_flake(settings)), settings


@dataclass(frozen=True)
class Generated:
    written: list[Written]
    notes: list[str]


def _host_notes(record: dict[str, Any]) -> list[str]:
    if record["variants"]:
        return []
    reasons = sorted(set(record["not-buildable"].values()))
    return [
        "the host toolchain can build no variant on this machine"
        + (f" ({'; '.join(reasons)})" if reasons else "")
    ]


def generate(
    loaded: LoadedConfig,
    *,
    kernelnix_url: str | None = None,
    toolchain: str | None = None,
    force: bool = False,
    host_record: bool = True,
) -> Generated:
    """Write flake.nix, the plan and (host toolchain) the host record next to build.toml.

    Unset settings keep those of an unedited generated flake.nix, else the defaults.
    """
    plan = nix_plan(loaded)
    root = loaded.path.parent
    flake, settings = _flake(root, kernelnix_url, toolchain, force)
    written = [flake, _write_if_changed(root / PLAN_FILE, plan.to_json())]
    notes: list[str] = []
    if host_record and settings.toolchain == "host":
        record = probe_host(plan)
        written.append(_write_if_changed(root / HOST_FILE, host_json(record)))
        notes += _host_notes(record)
    return Generated(written, notes)
