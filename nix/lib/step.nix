# A derivation that runs one kernelnix command with the toolchain's Python
# (its `stepEnv`): the plan when none is committed, the bundle's CARD.md, the
# bundle. `args` are the command's words; they reach the builder as arguments,
# never as shell code, and name the output through builtins.placeholder "out".
# `attributes`: the derivation's other attributes (preferLocalBuild, ...).
{ toolchain }:
{
  system,
  name,
  args,
  attributes ? { },
}:
let
  inputs = toolchain.stepEnv system;
in
builtins.derivation (
  inputs.env
  // attributes
  // {
    inherit system name;
    builder = inputs.builder;
    args = [ ./step.sh ] ++ args;
    toolchainSetup = inputs.setup;
  }
)
