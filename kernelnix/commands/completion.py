"""`kernelnix completion SHELL` (alias `completions`, kernel-builder's name): the
completion script of bash, zsh, fish (click's own), elvish or powershell
(kernelnix.shells adds those two to click).
"""

from __future__ import annotations

import click
from click.shell_completion import get_completion_class

import kernelnix.shells  # noqa: F401  (registers elvish and powershell)
from kernelnix.cli import command, main

PROG_NAME = "kernelnix"
# The variable click's completion protocol reads (`_<PROG>_COMPLETE=bash_complete`).
COMPLETE_VAR = "_KERNELNIX_COMPLETE"
SHELLS = ("bash", "zsh", "fish", "elvish", "powershell")


@command("completion")
@click.argument("shell", type=click.Choice(SHELLS))
def completion_command(shell: str) -> None:
    """Commands, options and their choices complete; paths complete as files.
    `completions` is the same command under kernel-builder's name.

    \b
    Examples:
      eval "$(kernelnix completion bash)"      # in ~/.bashrc
      eval "$(kernelnix completion zsh)"       # in ~/.zshrc, after compinit
      kernelnix completion fish > ~/.config/fish/completions/kernelnix.fish
      eval (kernelnix completions elvish | slurp)  # in ~/.config/elvish/rc.elv
      kernelnix completions powershell >> $PROFILE
    """
    complete = get_completion_class(shell)
    assert complete is not None, "click knows every name in SHELLS"
    click.echo(complete(main, {}, PROG_NAME, COMPLETE_VAR).source())


main.add_command(completion_command, "completions")
