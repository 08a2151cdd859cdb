# Read the kernel's plan (kernelnix-plan.json, written by `kernelnix generate`)
# and refuse a plan that no longer matches build.toml or the Python package.
{ util, path }:
let
  planFile = path + "/kernelnix-plan.json";
  buildToml = path + "/build.toml";
  schemaVersion = 1;
  regenerate = "run `kernelnix generate` in the kernel directory, then `git add kernelnix-plan.json`";
  plan = builtins.fromJSON (builtins.readFile planFile);
  tomlHash = builtins.hashFile "sha256" buildToml;

  # The Python files of the package (the plan lists them in `sources`).
  pythonFiles =
    dir:
    builtins.concatLists (
      builtins.attrValues (
        builtins.mapAttrs (
          name: type:
          let
            rel = "${dir}/${name}";
          in
          if type == "directory" then
            (if name == "__pycache__" then [ ] else pythonFiles rel)
          else if builtins.any (ext: util.hasSuffix ".${ext}" name) plan.pyext then
            [ rel ]
          else
            [ ]
        ) (builtins.readDir (path + "/${dir}"))
      )
    );
  packageFiles = if builtins.pathExists (path + "/${plan.package-dir}") then pythonFiles plan.package-dir else [ ];
  unlisted = builtins.filter (f: !builtins.elem f plan.sources) packageFiles;
  missing = builtins.filter (f: !builtins.pathExists (path + "/${f}")) plan.sources;
in
if !builtins.pathExists buildToml then
  throw "kernelnix: no build.toml next to flake.nix (${toString path})"
else if !builtins.pathExists planFile then
  throw "kernelnix: kernelnix-plan.json is missing (or not tracked by git); ${regenerate}"
else if (plan.schema-version or null) != schemaVersion then
  throw "kernelnix: kernelnix-plan.json has schema version ${toString (plan.schema-version or "none")}, this kernelnix reads ${toString schemaVersion}; ${regenerate}"
else if plan.build-toml-sha256 != tomlHash then
  throw "kernelnix: kernelnix-plan.json is stale: build.toml changed since the plan was generated (plan: sha256 ${plan.build-toml-sha256}, build.toml: sha256 ${tomlHash}); ${regenerate}"
else if unlisted != [ ] then
  throw "kernelnix: kernelnix-plan.json is stale: its sources lack ${builtins.concatStringsSep ", " unlisted}; ${regenerate}"
else if missing != [ ] then
  throw "kernelnix: the plan's sources ${builtins.concatStringsSep ", " missing} do not exist (or git does not track them): `git add` them, or ${regenerate}"
else
  plan
