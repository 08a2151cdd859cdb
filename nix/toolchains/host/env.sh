# Sourced by the host toolchain's builders and scripts: finds this machine's
# Python (the one with torch) and sets KERNELNIX_PYTHON and PATH.
#
# With a host record (kernelnix-host.json, written by `kernelnix generate`)
# $hostPython and $hostPath come from it. Without one: python3 from PATH when it
# has torch (scripts run by the user), else the login shell's PATH (builders,
# whose environment Nix clears). $torchRequirement `none` (a noarch variant):
# a python3 without torch will do.

kernelnix_fail() {
  echo "kernelnix (host toolchain): $*" >&2
  exit 1
}

kernelnix_has_torch() {
  "$1" -c 'import importlib.util, sys; sys.exit(importlib.util.find_spec("torch") is None)' \
    2>/dev/null
}

kernelnix_login_path() {
  entry=$(getent passwd "$(id -u)") || return 0
  home=$(printf '%s' "$entry" | cut -d: -f6)
  shell=$(printf '%s' "$entry" | cut -d: -f7)
  env -i HOME="$home" USER="$(id -un)" "${shell:-/bin/sh}" -lc \
    'printf "\nKERNELNIX_LOGIN_PATH=%s\n" "$PATH"' </dev/null 2>/dev/null |
    sed -n 's/^KERNELNIX_LOGIN_PATH=//p' | tail -n 1
}

if [ -n "${hostPython:-}" ]; then
  PATH=$hostPath
  [ -x "$hostPython" ] ||
    kernelnix_fail "the Python recorded in kernelnix-host.json ($hostPython) does not exist;" \
      "run \`kernelnix generate\` to record this machine's toolchain"
  KERNELNIX_PYTHON=$hostPython
else
  PATH=${PATH:-/usr/bin:/bin}:/usr/bin:/bin
  candidate=$(command -v python3 || true)
  if [ -z "$candidate" ] || ! kernelnix_has_torch "$candidate"; then
    PATH=$(kernelnix_login_path):$PATH
    candidate=$(command -v python3 || true)
  fi
  # A noarch variant builds without Torch (its import check then says it skipped).
  if [ "${torchRequirement:-}" = none ]; then
    [ -n "$candidate" ] || kernelnix_fail "found no python3 on PATH or in your login shell"
  else
    { [ -n "$candidate" ] && kernelnix_has_torch "$candidate"; } ||
      kernelnix_fail "found no python3 with torch on PATH or in your login shell;" \
        "run \`kernelnix generate\` with the Python that has torch to record it in kernelnix-host.json"
  fi
  KERNELNIX_PYTHON=$candidate
fi
export PATH KERNELNIX_PYTHON
