"""This machine: its Nix system, its Torch, what it can build, the host toolchain record."""
