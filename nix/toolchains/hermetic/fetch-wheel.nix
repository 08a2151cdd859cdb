# A locked wheel as a fixed-output download. The file name is decoded: the
# install step reads the wheel's tags from it, and `%` may not be part of a
# store path (torch-2.13.0%2Bcu126-...).
{ fetchurl }:
wheel:
fetchurl {
  inherit (wheel) url hash;
  name = builtins.replaceStrings [ "%2B" "%2b" ] [ "+" "+" ] (baseNameOf wheel.url);
}
