# A Python package from a locked wheel (URL, hash and requirements recorded by
# `kernelnix lock-wheels`): the `kernels` loader, which the post-build checks
# import every variant through.
{
  pkgs,
  python,
  name,
  wheel,
}:
python.pkgs.buildPythonPackage {
  pname = name;
  inherit (wheel) version;
  format = "wheel";
  src = pkgs.fetchurl {
    inherit (wheel) url hash;
    # The wheel's file name (the install step reads its tags): decoded, since
    # `%` may not be part of a store path (torch-2.13.0%2Bcu126-...).
    name = builtins.replaceStrings [ "%2B" "%2b" ] [ "+" "+" ] (baseNameOf wheel.url);
  };
  nativeBuildInputs = [ pkgs.autoPatchelfHook ];
  buildInputs = [ pkgs.stdenv.cc.cc.lib or pkgs.stdenv.cc.cc ];
  dependencies = map (
    dependency:
    python.pkgs.${dependency}
      or (throw "kernelnix (hermetic toolchain): nixpkgs' Python has no ${dependency}, which the ${name} wheel requires")
  ) (wheel.dependencies or [ ]);
  dontCheckRuntimeDeps = true;
  pythonImportsCheck = [ (builtins.replaceStrings [ "-" ] [ "_" ] name) ];
}
