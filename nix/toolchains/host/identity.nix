# What addresses a host-toolchain derivation beyond its inputs in the store: the
# identity of the machine that builds it, the `identity` of kernelnix-host.json
# (compilers, C library, Python, Torch: kernelnix/host/identity.py). The one
# place that decides it; inputs of a variant that are store paths (locked wheels)
# address it already, as every input does.
#
# With an identity, the derivations are ordinary substitutable ones: machines
# with the same identity compute the same store paths and share outputs through
# a binary cache or remote builders, another compiler gives other store paths,
# and the builder checks the identity before it builds (setup.sh). Without one
# (a record written before identities, or no record: the probe, which reads the
# machine it runs on) the output depends on an unrecorded machine: it is built
# where it is asked for and never substituted.
{ record }:
if record != null && record ? identity then
  { hostIdentity = builtins.toJSON record.identity; }
else
  {
    preferLocalBuild = true;
    allowSubstitutes = false;
  }
