"""The `kernelnix` command line: the group, and the glue shared by every command.

Commands live in `kernelnix/commands/`, one module per concern, each registered
on `main` with `command` when its module is imported; `COMMANDS` says which
module holds a command and what it does.
"""

from __future__ import annotations

import gc
import importlib
import inspect
import os
import sys
import types
from collections.abc import Callable, Iterable
from functools import wraps
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import click
from click.shell_completion import CompletionItem

from kernelnix import __version__
from kernelnix.core.diagnostics import Diagnostic, UserError, diagnostics_json

F = TypeVar("F", bound=Callable[..., Any])

EXIT_BAD_INPUT = 2

DIR_ARGUMENT = click.argument(
    "directory",
    required=False,
    default=".",
    type=click.Path(file_okay=False, path_type=Path),
)


def print_warnings(warnings: Iterable[Diagnostic]) -> None:
    for warning in warnings:
        click.echo(warning.render(), err=True)


def exits_on(error: type[Exception], prefix: str, code: int = 1) -> Callable[[F], F]:
    """A decorator: `error` raised by the command becomes `error: <prefix><message>` on
    stderr and exit code `code`, no traceback (failures that are not bad input)."""

    def decorate(func: F) -> F:
        @wraps(func)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            try:
                return func(*args, **kwargs)
            except error as exc:
                click.echo(f"error: {prefix}{exc}", err=True)
                sys.exit(code)

        return wrapper  # type: ignore[return-value]

    return decorate


def reports_user_errors(func: F) -> F:
    """Turn a UserError into its diagnostics on stderr and exit code 2, no traceback."""

    @wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except UserError as exc:
            if kwargs.get("as_json"):
                click.echo(diagnostics_json(exc.diagnostics))
            click.echo(exc.render(), err=True)
            sys.exit(EXIT_BAD_INPUT)

    return wrapper  # type: ignore[return-value]


class CommandEntry(NamedTuple):
    """Where a command lives and what it does, known without importing it."""

    module: str  # under kernelnix/commands
    summary: str  # the first sentence of its help


# Only the module of the command being run is imported, which keeps start-up
# short (see benchmarks/bench_plan.py); `kernelnix --help` and completing a
# command's name show the summaries, so that they import no command module, nor
# what the modules import (pydantic, Jinja2, ...). The summary is written here
# only: `command` puts it at the head of the command's own help.
COMMANDS: dict[str, CommandEntry] = {
    "archive": CommandEntry(
        "reproduce",
        "Copy the downloads DIRECTORY's bundle is built from into a binary cache, so that "
        "it can be built (and reproduced) after a registry drops a file.",
    ),
    "build": CommandEntry(
        "build", "Build the variants of DIRECTORY/build.toml into DIRECTORY/build/."
    ),
    "build-and-copy": CommandEntry(
        "nix", "Build DIRECTORY's bundle with Nix and copy its variants into DIRECTORY/build."
    ),
    "build-and-upload": CommandEntry(
        "author", "Build DIRECTORY's bundle with Nix, then upload exactly what was built."
    ),
    "bundle": CommandEntry(
        "bundle",
        "Put built variants side by side in OUT, each with its build provenance (the step "
        "a flake's bundle runs).",
    ),
    "build-variant": CommandEntry(
        "build_variant",
        "Build one variant of a plan into OUT/NAME/ (the step a Nix derivation runs).",
    ),
    "check": CommandEntry(
        "check", "Check PATH: one variant directory, or a build tree of variants."
    ),
    "check-abi": CommandEntry(
        "check",
        "Check the shared libraries of DIRECTORY's variants: manylinux symbol versions and "
        "libraries (or the macOS deployment target), Python's stable ABI (abi3) and, for "
        "stable-ABI variants, Torch's stable ABI.",
    ),
    "check-builds": CommandEntry(
        "check",
        "Parse the metadata.json of each of DIRECTORY's variants (result/, build/ or the "
        "directory itself) and check it against the variant's name.",
    ),
    "check-config": CommandEntry("config", "Validate DIRECTORY/build.toml (any edition in use)."),
    "clean-pyproject": CommandEntry(
        "build",
        "Delete what create-pyproject wrote into TARGET (default: DIRECTORY) and what "
        "`pip install -e` built into the package (_ops.py, the op libraries).",
    ),
    "completion": CommandEntry("completion", "Print the completion script of SHELL for kernelnix."),
    "create-pyproject": CommandEntry(
        "build",
        "Write pyproject.toml and setup.py for local development into TARGET (default: "
        "DIRECTORY, the kernel).",
    ),
    "devshell": CommandEntry(
        "nix",
        "Enter DIRECTORY's development shell (`nix develop`): the toolchain's environment with "
        "`kernelnix` for `kernelnix build --local`, and LOCAL_KERNELS=<repo-id>=$PWD/build.",
    ),
    "fill-card": CommandEntry(
        "author",
        "Render DIRECTORY's card (its CARD.md template, else the default) to OUTPUT or stdout.",
    ),
    "generate": CommandEntry(
        "nix", "Write DIRECTORY's flake.nix, kernelnix-plan.json and kernelnix-host.json."
    ),
    "hash": CommandEntry(
        "author", "Write the SHA-256 digest of every variant's files into its metadata.json."
    ),
    "host-record": CommandEntry(
        "plan", "Write this machine's host record (kernelnix-host.json) for the variants of PLAN."
    ),
    "init": CommandEntry(
        "author",
        "Create a kernel project: build.toml, a sample kernel (out = in + 1), tests, a card "
        "template, the flake files; then `git init` and stage everything.",
    ),
    "list-variants": CommandEntry(
        "plan", "List the build variants of DIRECTORY/build.toml, one per line."
    ),
    "lock": CommandEntry(
        "kernel_lock",
        "Lock DIRECTORY/build.toml's kernel-depends, transitive ones included, to Hub "
        "commits in DIRECTORY/kernels.lock.",
    ),
    "lock-wheels": CommandEntry(
        "lock", "Record URL and sha256 of every wheel the toolchains fetch."
    ),
    "lock-toolchain": CommandEntry(
        "lock",
        "Record URL, hash and size of every Debian package, npm tarball and wheel the "
        "hermetic toolchain is made of.",
    ),
    "nix-library": CommandEntry("nix", "Print the flake URL of this kernelnix's Nix library."),
    "plan": CommandEntry(
        "plan", "Write the build plan of DIRECTORY/build.toml (JSON, every system)."
    ),
    "reproduce": CommandEntry(
        "reproduce",
        "Rebuild the kernel at SOURCE and compare each variant with a published bundle or "
        "Hub repository.",
    ),
    "schema": CommandEntry(
        "schema",
        "Print the JSON Schema of build.toml, metadata.json, the plan or the host record.",
    ),
    "testshell": CommandEntry(
        "nix",
        "Enter DIRECTORY's test shell (`nix develop`): a built variant on PYTHONPATH, in "
        "LOCAL_KERNELS and KERNEL_PATH, as `nix run .#ci-test` runs the tests.",
    ),
    "update-build": CommandEntry(
        "config", "Rewrite a pre-edition DIRECTORY/build.toml as edition 5."
    ),
    "upload": CommandEntry(
        "author", "Upload the checked build variants of DIRECTORY to the Hugging Face Hub."
    ),
}
# kernel-builder's name for `completion`: the same command under a second name.
COMMANDS["completions"] = COMMANDS["completion"]


def _short_help(name: str, limit: int = 45) -> str:
    """The short help click makes of the command's summary, the way it would of its help."""
    return click.Command(name, help=COMMANDS[name].summary).get_short_help_str(limit)


class LazyGroup(click.Group):
    """A click group that imports a command's module when the command is used."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            entry = COMMANDS.get(cmd_name)
            if entry is None:
                _register_commands()
            else:
                _import_command_module(entry.module)
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        _register_commands()
        return super().list_commands(ctx)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # click's own layout, from the summaries: `kernelnix --help` imports no command.
        names = sorted(COMMANDS)
        limit = formatter.width - 6 - max(map(len, names))
        with formatter.section("Commands"):
            formatter.write_dl([(name, _short_help(name, limit)) for name in names])

    def shell_complete(self, ctx: click.Context, incomplete: str) -> list[CompletionItem]:
        # A command's name completes from the summaries too; options as click does.
        names = [name for name in sorted(COMMANDS) if name.startswith(incomplete)]
        return [
            CompletionItem(name, help=_short_help(name)) for name in names
        ] + click.Command.shell_complete(self, ctx, incomplete)

    def _main_shell_completion(
        self, ctx_args: Any, prog_name: str, complete_var: str | None = None
    ) -> None:
        # click's default variable name; the elvish and powershell completers
        # are registered by kernelnix.shells.
        name = prog_name.replace("-", "_").replace(".", "_").upper()
        complete_var = complete_var or f"_{name}_COMPLETE"
        if os.environ.get(complete_var):
            import kernelnix.shells  # noqa: F401  (registers elvish and powershell)
        super()._main_shell_completion(ctx_args, prog_name, complete_var)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, prog_name="kernelnix")
def main() -> None:
    """Build Hub-conforming PyTorch kernels from build.toml with Nix.

    \b
    Examples:
      kernelnix check-config examples/relu
      kernelnix update-build --dry-run path/to/kernel
      kernelnix build --local examples/relu
      kernelnix COMMAND --help
    """
    # kernelnix uses no pydantic plugin, and pydantic looks for them by scanning
    # every installed package's entry points when it builds its first validator
    # (5 ms of each run that validates). An explicit setting is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    _skip_plugin_loader()


# The values of PYDANTIC_DISABLE_PLUGINS with which pydantic loads no plugin at all.
_ALL_PLUGINS_OFF = ("__all__", "1", "true")
_PLUGIN_LOADER = "pydantic.plugin._loader"


def _skip_plugin_loader() -> None:
    """With every plugin off, stand in for pydantic's plugin loader, whose only
    export is `get_plugins` and which then finds none: the real module imports
    importlib.metadata (email, csv, zipfile: 7 % of `check-config`'s
    instructions) just to answer that."""
    if os.environ["PYDANTIC_DISABLE_PLUGINS"] not in _ALL_PLUGINS_OFF:
        return
    if _PLUGIN_LOADER in sys.modules:
        return
    loader = types.ModuleType(_PLUGIN_LOADER, "kernelnix's stand-in: plugins are off")
    loader.get_plugins = tuple  # type: ignore[attr-defined]  # no plugin, as the real one says
    sys.modules[_PLUGIN_LOADER] = loader


def _import_command_module(module: str) -> None:
    """Import kernelnix/commands/<module>.py with the cyclic garbage collector paused.

    The import makes tens of thousands of objects that live as long as the process
    (pydantic's models, the config's and the plan's): the collector would only walk
    them again and again (3 % of `kernelnix plan`). They are then frozen out of its
    sight (`gc.freeze`), so that the command's own collections stay short."""
    gc.disable()
    try:
        importlib.import_module(f"kernelnix.commands.{module}")
    finally:
        gc.freeze()
        gc.enable()


def _register_commands() -> None:
    for module in sorted({entry.module for entry in COMMANDS.values()}):
        importlib.import_module(f"kernelnix.commands.{module}")


def command(name: str, details: str | None = None, **attrs: Any) -> Callable[[F], click.Command]:
    """`main.command(name, **attrs)`, its help the summary in COMMANDS followed by
    `details` (default: the function's docstring, which so holds no summary)."""

    def decorate(func: F) -> click.Command:
        text = inspect.cleandoc(details or func.__doc__ or "")
        return main.command(name, help=f"{COMMANDS[name].summary}\n\n{text}", **attrs)(func)

    return decorate
