# A variant's kernel dependencies (the plan's `kernel-deps`, from kernels.lock and
# kernelnix-kernels.json): each locked file a fixed-output download (Nix's own
# fetchurl, by URL and sha256), each dependency's variant folder assembled from
# them with the toolchain's shell. `localKernels` names the folders the way the
# loader's LOCAL_KERNELS does, for the import check and ci-test.
{
  system,
  # The toolchain's shell and PATH (buildTools).
  tools,
  # The variant's name, for the error.
  name,
  kernelDeps,
}:
let
  fetchFile = file: import <nix/fetchurl.nix> { inherit (file) url sha256; };
  folder =
    dep:
    builtins.derivation {
      inherit system;
      name = "kernel-dep-${builtins.replaceStrings [ "/" ] [ "-" ] dep.repo-id}-${dep.variant}";
      builder = tools.shell;
      PATH = tools.path;
      # One line per file: its path under the folder (checked by kernelnix to be a
      # plain relative path), then its download.
      files = builtins.concatStringsSep "\n" (map (f: "${f.path} ${fetchFile f}") dep.files);
      args = [
        "-c"
        ''
          set -e
          printf '%s\n' "$files" | while read -r rel src; do
            mkdir -p "$out/$(dirname "$rel")"
            cp "$src" "$out/$rel"
          done
        ''
      ];
      preferLocalBuild = true;
      allowSubstitutes = false;
    };
  folders =
    if kernelDeps.error != null then
      throw "kernelnix: cannot build ${name}: ${kernelDeps.error}"
    else
      map (dep: {
        inherit (dep) repo-id;
        path = folder dep;
      }) kernelDeps.kernels;
in
{
  localKernels = builtins.concatStringsSep ":" (map (f: "${f.repo-id}=${f.path}") folders);
}
