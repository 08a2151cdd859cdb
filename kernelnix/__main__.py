"""`python -m kernelnix`: the same as the `kernelnix` command."""

from kernelnix.cli import main

main()
