# `nix develop` shells. Dev shell: the toolchain's environment for a variant
# (toolchain.shellEnv: its compilers, CMake, Torch) plus a `kernelnix` function
# (for `kernelnix build --local`) and LOCAL_KERNELS=<repo-id>=$PWD/build. Test
# shell: a built variant as ci-test sees it (./test-env.nix): on PYTHONPATH with
# its Torch, in LOCAL_KERNELS and KERNEL_PATH.
{ util, kernelnixSrc }:
{
  system,
  plan,
  toolchain,
}:
let
  repoId = if plan.hub.repo-id == null then "" else plan.hub.repo-id;
  testEnvOf = import ./test-env.nix { inherit kernelnixSrc; } { inherit plan system; };
  setup = ''
    . "$hostEnv"
    kernelnix() { PYTHONPATH="$KERNELNIX_SOURCE''${PYTHONPATH:+:$PYTHONPATH}" "$KERNELNIX_PYTHON" -m kernelnix "$@"; }
  '';
  # `variantName` "": the dev shell of a kernel with no variant here (the tools alone).
  shell =
    variantName: name: env: shellHook:
    util.mkShell {
      inherit system name;
      inherit (toolchain.buildTools system) bash;
      env =
        toolchain.shellEnv {
          inherit system;
          name = variantName;
          variant = if variantName == "" then null else plan.variants.${system}.${variantName};
        }
        // env
        // {
          KERNELNIX_REPO_ID = repoId;
          KERNELNIX_SOURCE = kernelnixSrc;
        };
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
    let
      environment = testEnvOf variantName variant;
    in
    shell variantName "${plan.python-name}-test-shell"
      (
        {
          KERNELNIX_VARIANT = variantName;
          KERNELNIX_VARIANT_DIR = variant;
          KERNELNIX_TEST_PATH = environment.pythonPath (
            if environment.depends == null then "" else "${environment.depends}"
          );
          KERNELNIX_LOCAL_KERNELS = environment.localKernels;
        }
        # pytest in the shell asks the loader for the CPU backend, as ci-test does.
        // (
          if environment.askCpu then
            {
              KERNELNIX_CI_BACKEND = "cpu";
              PYTEST_PLUGINS = "kernelnix.checks.ci_backend";
            }
          else
            { }
        )
      )
      ''
        unset LD_LIBRARY_PATH
        export PYTHONPATH="$KERNELNIX_TEST_PATH" KERNEL_PATH="$KERNELNIX_VARIANT_DIR"
        if [ -n "$KERNELNIX_LOCAL_KERNELS" ]; then export LOCAL_KERNELS="$KERNELNIX_LOCAL_KERNELS"; fi
      '';
}
