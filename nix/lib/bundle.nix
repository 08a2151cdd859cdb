# The bundle: every bundle variant the toolchain offers, side by side, as the
# Hub expects them (`<variant>/metadata.json`, ...), plus benchmarks/.
{ util }:
{
  system,
  name,
  variants,
  benchmarks,
  # The toolchain's shell and PATH (buildTools): the host's /bin/sh, or
  # nixpkgs' bash and coreutils for the hermetic toolchain.
  tools,
}:
builtins.derivation {
  inherit system name;
  builder = tools.shell;
  args = [
    "-c"
    ''
      set -eu
      mkdir -p "$out"
      for variant in $variants; do cp -r "$variant"/. "$out"/; done
      if [ -n "$benchmarks" ]; then cp -r "$benchmarks/benchmarks" "$out/benchmarks"; fi
    ''
  ];
  variants = builtins.attrValues variants;
  benchmarks = if benchmarks == null then "" else benchmarks;
  PATH = tools.path;
  preferLocalBuild = true;
  allowSubstitutes = false;
}
