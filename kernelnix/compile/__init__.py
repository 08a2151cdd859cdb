"""The build step: one variant (`build_variant`), every variant of this machine
(`build_planned`), and the files for local development (`create_pyproject`)."""

from kernelnix.compile.variant import BuildError, build_variant

__all__ = ["BuildError", "build_variant"]
