"""`kernelnix completion SHELL`: click's completion script for bash, zsh or fish."""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

from kernelnix.cli import main

PROG_NAME = "kernelnix"
# The variable click's completion protocol reads (`_<PROG>_COMPLETE=bash_complete`).
COMPLETE_VAR = "_KERNELNIX_COMPLETE"
SHELLS = ("bash", "zsh", "fish")


@main.command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_command(shell: str) -> None:
    """Print the completion script of SHELL for kernelnix.

    Commands, options and their choices complete; paths complete as files.

    \b
    Examples:
      eval "$(kernelnix completion bash)"      # in ~/.bashrc
      eval "$(kernelnix completion zsh)"       # in ~/.zshrc, after compinit
      kernelnix completion fish > ~/.config/fish/completions/kernelnix.fish
    """
    complete = get_completion_class(shell)
    assert complete is not None, "click knows every name in SHELLS"
    click.echo(complete(main, {}, PROG_NAME, COMPLETE_VAR).source())
