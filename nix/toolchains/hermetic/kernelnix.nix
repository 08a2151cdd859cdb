# kernelnix as a Nix Python application, built from this repository's
# pyproject.toml: its name, version and dependencies are read from it, so the
# package follows the file. Dependencies with an environment marker are left
# out: tomli is for Pythons older than the toolchain's, and rtoml only reads
# build.toml faster (kernelnix/config/toml_parser.py): without it the standard
# library's tomllib does the same work.
# Its templates (kernelnix/templates) are package data.
{
  util,
  python,
  pyproject,
  src,
}:
let
  project = pyproject.project;
  # "huggingface_hub>=0.20" -> "huggingface-hub" (nixpkgs' attribute names)
  attrName =
    requirement:
    let
      name = builtins.head (builtins.match "[[:space:]]*([A-Za-z0-9._-]+).*" requirement);
    in
    builtins.replaceStrings [ "_" "." ] [ "-" "-" ] (util.toLower name);
  unconditional = builtins.filter (r: builtins.match ".*;.*" r == null) project.dependencies;
  dependency =
    name:
    python.pkgs.${name}
      or (throw "kernelnix (hermetic toolchain): nixpkgs' Python has no package ${name}, a dependency in kernelnix's pyproject.toml");
in
python.pkgs.buildPythonApplication {
  pname = project.name;
  inherit (project) version;
  pyproject = true;
  inherit src;
  build-system = [ python.pkgs.setuptools ];
  dependencies = map (r: dependency (attrName r)) unconditional;
  # The tests need Nix, compilers and the examples: they run in the repository.
  doCheck = false;
  pythonImportsCheck = [ "kernelnix" ];
  passthru.requirements = map attrName unconditional;
}
