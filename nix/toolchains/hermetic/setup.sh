# Sourced by the shared variant builder (nix/lib/build-variant.sh) for the
# hermetic toolchain. The derivation's environment already holds everything
# (PATH, KERNELNIX_PYTHON, CC, CXX, toolkit roots: store paths only); this
# only makes sure nothing else is read.
unset PYTHONPATH PYTHONHOME LD_LIBRARY_PATH
[ -x "$KERNELNIX_PYTHON" ] || {
  echo "kernelnix (hermetic toolchain): $KERNELNIX_PYTHON is missing" >&2
  exit 1
}
export KERNELNIX_PYTHON
