"""Shared plumbing: diagnostics, atomic files, processes, progress, versions."""
