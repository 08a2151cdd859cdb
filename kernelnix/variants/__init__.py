"""Variants: the version matrix (data), the variants of a config, their names and archs."""
