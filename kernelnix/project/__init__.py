"""A kernel project's files and the Nix commands run on them: the scaffold of
`init` and the files `generate` writes (generate.py: plan, host record,
flake.nix), running Nix on the project's flake (nix.py) with the Nix library of
this kernelnix (library.py)."""
