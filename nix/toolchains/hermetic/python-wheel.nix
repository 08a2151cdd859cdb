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
  src = import ./fetch-wheel.nix { inherit (pkgs) fetchurl; } wheel;
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
