"""CLI commands, one module per concern; see kernelnix/cli.py."""
