# Sourced by the hermetic toolchain's dev and test shells (`nix develop`), on the
# user's machine: the registry's tools before the user's PATH, its Python as
# `python3` (with its C and C++ runtime for Python alone: the host's programs keep
# the host's), and the variant's locked Torch, python-depends and nvcc, as its
# build has them (../host/setup.sh).
unset PYTHONPATH PYTHONHOME
PATH=$pythonCommands:$hermeticPath${PATH:+:$PATH}
KERNELNIX_PYTHON=$pythonCommands/python3
if [ -n "${wheelEnv:-}" ]; then
  PYTHONPATH=$wheelEnv
  for nvcc in "$wheelEnv"/nvidia/*/bin/nvcc; do
    if [ -x "$nvcc" ]; then PATH=${nvcc%/nvcc}:$PATH; fi
  done
fi
if [ -n "${dependsEnv:-}" ]; then PYTHONPATH=${PYTHONPATH:+$PYTHONPATH:}$dependsEnv; fi
export PATH KERNELNIX_PYTHON
if [ -n "${PYTHONPATH:-}" ]; then export PYTHONPATH; fi
