# The hermetic toolchain: nixpkgs-based, pinned, manylinux_2_28 C library and
# compilers, CUDA / ROCm / XPU toolkits from Nix; redistributable variants.
# Not implemented yet: this file fixes its place behind the toolchain
# interface (see host.nix and docs/flake.md). The kernel flake passes its
# optional `nixpkgs` input here.
{ util, kernelnixSrc }:
{
  path,
  plan,
  nixpkgs ? null,
}:
let
  unavailable =
    if nixpkgs == null then
      throw "kernelnix: toolchain \"hermetic\" needs a nixpkgs input: add `inputs.nixpkgs.url = ...;` to flake.nix (or use toolchain = \"host\")"
    else
      throw "kernelnix: toolchain \"hermetic\" is not implemented yet; use toolchain = \"host\"";
in
{
  name = "hermetic";
  redistributable = true;
  offers = system: name: variant: unavailable;
  mkVariant = args: unavailable;
  scriptEnv = unavailable;
  shellEnv = unavailable;
}
