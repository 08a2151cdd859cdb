# Builder of one variant, for every toolchain: the same Python build step as
# `kernelnix build --local`, on the filtered kernel source (read-only in the
# store: the step works in its own directory), into $out/<variant>/.
# $toolchainSetup (the toolchain's) sets KERNELNIX_PYTHON and PATH.
set -eu
. "$toolchainSetup"

export HOME="$TMPDIR/home" PYTHONDONTWRITEBYTECODE=1 HF_HUB_OFFLINE=1
mkdir -p "$HOME"

# The compiler cache is opt-in (kernelFlake's compilerCache): ccache in a directory
# shared by builds, which a sandboxed build reaches through extra-sandbox-paths.
# Off, no compiler launcher at all: the build reads nothing outside its inputs.
if [ -n "${KERNELNIX_COMPILER_CACHE:-}" ]; then
  command -v ccache >/dev/null ||
    { echo "kernelnix: compilerCache needs ccache on the builder's PATH ($PATH)" >&2; exit 1; }
  [ -d "$KERNELNIX_COMPILER_CACHE" ] && [ -w "$KERNELNIX_COMPILER_CACHE" ] || {
    echo "kernelnix: the compiler cache $KERNELNIX_COMPILER_CACHE is not a directory this build" \
      "can write; create it (writable by the build users), and with sandbox = true add it to" \
      "extra-sandbox-paths" >&2
    exit 1
  }
  # Group-writable entries: builds run as different build users.
  export CCACHE_DIR="$KERNELNIX_COMPILER_CACHE" CCACHE_UMASK=007 KERNELNIX_COMPILER_LAUNCHER=ccache
else
  export KERNELNIX_COMPILER_LAUNCHER=none
fi

# NIX_BUILD_CORES: Nix's `cores` setting; 0 means all of them (Ninja's default).
jobs=
if [ "${NIX_BUILD_CORES:-0}" -gt 0 ]; then jobs="--jobs $NIX_BUILD_CORES"; fi
policy=
if [ -n "$redistributable" ]; then policy=--redistributable; fi
# The host toolchain's glibc target (nix/toolchains/host/glibc.nix): a store path.
if [ -n "${glibcTarget:-}" ]; then policy="$policy --glibc-target $glibcTarget"; fi
if [ -n "${noImportCheck:-}" ]; then policy="$policy --no-import-check"; fi

# The CMake project in a folder whose path is the same in every build of the
# derivation ($TMPDIR is /build in the sandbox), not a random temporary one:
# what is not mapped to a neutral path keeps it (-G's device debug information
# names the build folder; kernelnix/compile/nvcc_host.py maps the rest), and
# `nix build --rebuild` must see the same bytes. The steps of a build object by
# object (nix/lib/variant.nix: configure, one per object, then the variant)
# restore their tree at that same path, so that their bytes are the one-step
# build's.
# shellcheck disable=SC2086 # $jobs is empty or two words, $policy up to four
set -- $jobs $policy \
  --work-dir "${TMPDIR:-/tmp}/kernelnix-build" \
  --plan "$planFile" \
  --variant "$variant" \
  --system "$targetSystem" \
  --unique-id "$uniqueId" \
  --out "$out"
case "${kernelnixStep:-variant}" in
  configure) set -- "$@" --step configure ;;
  object) set -- "$@" --step object --configured "$configured" --object "$objectSource" --source "$src" ;;
  *)
    # localKernels: the kernel dependencies' folders (nix/lib/kernel-deps.nix),
    # which the import check resolves get_kernel_dep with, as the loader's
    # LOCAL_KERNELS.
    set -- "$@" --source "$src" --kernel-git "$kernelGit" --toolchain "$toolchainName" \
      ${localKernels:+--local-kernels "$localKernels"} \
      ${configured:+--configured "$configured" --objects-file "$objectsPath"}
    ;;
esac
exec "$KERNELNIX_PYTHON" -m kernelnix build-variant "$@"
