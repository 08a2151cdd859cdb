# Sourced first by every builder of the hermetic toolchain (the shared
# ../host/setup.sh, the wheels' unpacking) and by its scripts: the registry's
# Python and a PATH of store paths, from the derivation's environment
# (./default.nix). Nothing the caller's environment holds is read.
# LD_LIBRARY_PATH: the registry's C and C++ runtime, for Torch's libraries in
# the import check and ci-test (their RUNPATH names only their own folders, and
# the loader's default folders, /lib and /usr/lib, are not in the store).
unset PYTHONPATH PYTHONHOME
PATH=$hermeticPath
KERNELNIX_PYTHON=$hermeticPython
LD_LIBRARY_PATH=$libraries
export PATH KERNELNIX_PYTHON LD_LIBRARY_PATH
