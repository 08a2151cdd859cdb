# `nix develop` shells. Dev shell: the toolchain's environment plus a
# `kernelnix` function (for `kernelnix build --local`) and
# LOCAL_KERNELS=<repo-id>=$PWD/build. Test shell: a built variant on
# PYTHONPATH, in LOCAL_KERNELS and KERNEL_PATH, like ci-test.
{ util, kernelnixSrc }:
{
  system,
  plan,
  toolchain,
}:
let
  repoId = if plan.hub.repo-id == null then "" else plan.hub.repo-id;
  setup = ''
    . "$hostEnv"
    kernelnix() { PYTHONPATH="$KERNELNIX_SOURCE''${PYTHONPATH:+:$PYTHONPATH}" "$KERNELNIX_PYTHON" -m kernelnix "$@"; }
  '';
  # The toolchain's shell environment: one for all (host), or per variant.
  envFor = toolchain.shellEnvFor or (variantName: toolchain.shellEnv);
  shell =
    variantName: name: env: shellHook:
    util.mkShell {
      inherit system name;
      inherit (toolchain.buildTools system) bash;
      env = envFor variantName // env // { KERNELNIX_REPO_ID = repoId; KERNELNIX_SOURCE = kernelnixSrc; };
      shellHook = setup + shellHook;
    };
in
{
  dev =
    variantName:
    shell variantName "${plan.python-name}-dev-shell" { KERNELNIX_VARIANT = variantName; } ''
      if [ -n "$KERNELNIX_REPO_ID" ]; then export LOCAL_KERNELS="$KERNELNIX_REPO_ID=$PWD/build"; fi
    '';
  test =
    variantName: variant:
    shell variantName "${plan.python-name}-test-shell"
      {
        KERNELNIX_VARIANT = variantName;
        KERNELNIX_VARIANT_DIR = variant;
        KERNELNIX_KERNEL_DEPS = variant.localKernels or "";
      }
      ''
        unset LD_LIBRARY_PATH
        export PYTHONPATH="$KERNELNIX_VARIANT_DIR/$KERNELNIX_VARIANT" KERNEL_PATH="$KERNELNIX_VARIANT_DIR"
        if [ -n "$KERNELNIX_REPO_ID" ]; then export LOCAL_KERNELS="$KERNELNIX_REPO_ID=$KERNELNIX_VARIANT_DIR"; fi
        # Its kernel dependencies' folders (docs/kernel-deps.md).
        if [ -n "$KERNELNIX_KERNEL_DEPS" ]; then export LOCAL_KERNELS="''${LOCAL_KERNELS:+$LOCAL_KERNELS:}$KERNELNIX_KERNEL_DEPS"; fi
      '';
}
