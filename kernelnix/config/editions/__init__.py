"""The pre-edition shapes of build.toml (v3, v4), each with its upgrade to the next,
and the probe that tells which one a file is written in (`probe.py`). Edition 5,
the one model the rest of kernelnix sees, is `kernelnix.config.model`."""
