"""kernelnix: build Hub-conforming PyTorch compute kernels with Nix."""

__version__ = "0.1.0"
