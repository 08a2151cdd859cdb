# Sourced by the hermetic toolchain's wheel unpacking (../host/wheels.nix,
# afterUnpack), $out being the unpacked wheel: every dynamically linked program
# in it (nvcc, cicc, ptxas, ...) is pointed at the registry's loader ($loader)
# and C library ($libraries). Built for a machine with /lib64/ld-linux-*, they
# would not start in the sandbox, which has none; libraries keep their RUNPATH.
find "$out" -type f -perm -u+x | while read -r program; do
  if "$patchelf" --print-interpreter "$program" >/dev/null 2>&1; then
    "$patchelf" --set-interpreter "$loader" --add-rpath "$libraries" "$program"
  fi
done
