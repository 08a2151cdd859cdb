{
  description = "kernelnix with the host toolchain as the default toolchain";

  # For a kernel-builder flake.nix, whose only change is its input URL and which
  # cannot name a toolchain: `<kernelnix URL>?dir=nix/flakes/host` builds it with
  # this machine's compilers and Python (faster, not reproducible elsewhere)
  # instead of the hermetic toolchain. The library is kernelnix's own (../../lib).
  outputs =
    { self }:
    {
      lib =
        (import ../../lib {
          root = ../../..;
          defaultToolchain = "host";
          revision = {
            rev = self.rev or null;
            narHash = self.narHash or null;
          };
        }).flakeLib;
    };
}
