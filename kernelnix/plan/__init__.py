"""The build plan: the contract between Python and Nix, its ids and the metadata it carries."""
