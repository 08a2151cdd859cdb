# How a built variant's tests see it, the same for `ci-test` (./scripts.nix) and
# the test shell (./shells.nix): like the reference, the variant directory on
# PYTHONPATH and in LOCAL_KERNELS. A variant built in an environment of its own
# (locked wheels: `wheelEnv`) is tested in it, its Torch on PYTHONPATH as its
# import check loaded it, with its python-depends (`dependsEnv`) after it, and a
# tvm-ffi variant's Torch for its tests (`testEnv`, wheels.nix) after those. A CPU
# variant's environment holds Torch's CUDA wheel (PyPI has no CPU one), so the
# loader is told to ask for the CPU backend (kernelnix.checks.ci_backend), as
# users of a CUDA Torch do.
{ kernelnixSrc }:
{ plan, system }:
variantName: variant:
let
  environment = variant.wheelEnv or null;
  testEnv = variant.testEnv or null;
  depends = variant.dependsEnv or null;
  backend = plan.variants.${system}.${variantName}.backend;
  askCpu = environment != null && backend == "cpu";
  optional = value: if value == null then [ ] else [ "${value}" ];
  repoId = plan.hub.repo-id;
in
{
  inherit backend askCpu depends;
  # Other releases of the python-depends, which ci-test falls back to as the
  # import check did (kernelnix.checks.import_check).
  alternatives = variant.dependsAlternatives or [ ];
  # PYTHONPATH: the variant, its Torch, `dependsPath` (its python-depends'
  # environment, or a shell expression that chooses one), a tvm-ffi variant's Torch.
  pythonPath =
    dependsPath:
    builtins.concatStringsSep ":" (
      [ "${variant}/${variantName}" ]
      ++ optional environment
      ++ (if depends == null then [ ] else [ dependsPath ])
      ++ optional testEnv
      ++ (if askCpu then [ "${kernelnixSrc}" ] else [ ])
    );
  # The Torch the tests run in, and kernelnix: what looks for the variant's device
  # (kernelnix.checks.ci_device) before they run.
  devicePath = builtins.concatStringsSep ":" (
    optional environment ++ optional testEnv ++ [ "${kernelnixSrc}" ]
  );
  # The loader finds the kernel itself and its kernel dependencies here.
  localKernels = builtins.concatStringsSep ":" (
    builtins.filter (entry: entry != "") [
      (if repoId == null then "" else "${repoId}=${variant}")
      (variant.localKernels or "")
    ]
  );
}
