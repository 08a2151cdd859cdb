# Sourced by the scripts (ci-test, build-and-copy, build-and-upload) and the
# shells of the hermetic toolchain, after the variant's environment is set:
# its Python (Torch, kernelnix, kernels, pytest) and its tools on PATH.
export PATH KERNELNIX_PYTHON
