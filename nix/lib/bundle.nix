# The bundle: every bundle variant the toolchain offers, side by side, as the
# Hub expects them (`<variant>/metadata.json`, ...), plus benchmarks/.
{ util }:
{
  system,
  name,
  variants,
  benchmarks,
}:
builtins.derivation {
  inherit system name;
  builder = "/bin/sh";
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
  PATH = "/usr/bin:/bin";
  preferLocalBuild = true;
  allowSubstitutes = false;
}
