"""`check-config`'s gate: a config is refused before any build when it cannot be
planned, emitted or built (check_config.py: every problem at once)."""
