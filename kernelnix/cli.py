"""The `kernelnix` command line: the group, and the glue shared by every command.

Commands live in `kernelnix/commands/`, one module per concern; importing them
at the bottom registers them on `main`.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Callable, Iterable
from functools import wraps
from pathlib import Path
from typing import Any, TypeVar

import click

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


# Command name -> module under kernelnix/commands. Only the module of the command
# being run is imported, which keeps start-up short (see benchmarks/bench_plan.py).
COMMAND_MODULES = {
    "check-config": "config",
    "update-build": "config",
    "list-variants": "plan",
    "plan": "plan",
    "check": "check",
    "check-abi": "check",
    "check-builds": "check",
    "build": "build",
    "build-variant": "build",
    "create-pyproject": "build",
    "clean-pyproject": "build",
    "generate": "nix",
    "build-and-copy": "nix",
    "devshell": "nix",
    "testshell": "nix",
    "init": "author",
    "hash": "author",
    "fill-card": "author",
    "upload": "author",
    "build-and-upload": "author",
    "completion": "completion",
    "completions": "completion",
    "lock-wheels": "lock",
    "schema": "schema",
}


class LazyGroup(click.Group):
    """A click group that imports a command's module when the command is used."""

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name not in self.commands:
            module = COMMAND_MODULES.get(cmd_name)
            if module is None:
                _register_commands()
            else:
                importlib.import_module(f"kernelnix.commands.{module}")
        return super().get_command(ctx, cmd_name)

    def list_commands(self, ctx: click.Context) -> list[str]:
        _register_commands()
        return super().list_commands(ctx)

    def _main_shell_completion(
        self, ctx_args: Any, prog_name: str, complete_var: str | None = None
    ) -> None:
        # click's default variable name; the elvish and powershell completers
        # are registered by the module of the completion command.
        name = prog_name.replace("-", "_").replace(".", "_").upper()
        complete_var = complete_var or f"_{name}_COMPLETE"
        if os.environ.get(complete_var):
            importlib.import_module("kernelnix.commands.completion")
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
    # (about 10 ms of `kernelnix plan`). An explicit setting is kept.
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")


def _register_commands() -> None:
    for module in sorted(set(COMMAND_MODULES.values())):
        importlib.import_module(f"kernelnix.commands.{module}")
