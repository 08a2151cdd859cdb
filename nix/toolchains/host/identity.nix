# What addresses a host-toolchain derivation beyond its inputs in the store: the
# identity of the machine that builds it, the `identity` of kernelnix-host.json
# (compilers, C library, Python, Torch: kernelnix/host/identity.py). The one
# place that decides it, for a derivation without (null) or with the locked
# wheel environment of its variant (wheels.nix): that one's Torch and nvcc come
# from the wheels, store paths that address the derivation as every input does,
# so the machine's Torch and nvcc are left out of its identity.
#
# With an identity, the derivations are ordinary substitutable ones: machines
# with the same identity compute the same store paths and share outputs through
# a binary cache or remote builders, another compiler gives other store paths,
# and the builder checks the identity before it builds (setup.sh). Without one
# (a record written before identities, or no record: the probe, which reads the
# machine it runs on) the output depends on an unrecorded machine: it is built
# where it is asked for and never substituted.
{ record }:
wheelEnv:
if record == null || !(record ? identity) then
  {
    preferLocalBuild = true;
    allowSubstitutes = false;
  }
else
  {
    hostIdentity = builtins.toJSON (
      if wheelEnv == null then
        record.identity
      else
        builtins.removeAttrs record.identity [ "torch" ]
        // {
          compilers = builtins.removeAttrs (record.identity.compilers or { }) [ "nvcc" ];
        }
    );
  }
