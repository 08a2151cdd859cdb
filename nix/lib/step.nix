# A derivation that runs one kernelnix command with the toolchain's Python
# (its `stepEnv`): the plan when none is committed, and the bundle's CARD.md.
# `args` are the command's words; they reach the builder as arguments, never
# as shell code, and name the output through builtins.placeholder "out".
{ toolchain }:
{
  system,
  name,
  args,
}:
let
  inputs = toolchain.stepEnv system;
in
builtins.derivation (
  inputs.env
  // {
    inherit system name;
    builder = inputs.builder;
    args = [ ./step.sh ] ++ args;
    toolchainSetup = inputs.setup;
  }
)
