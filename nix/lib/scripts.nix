# The runnable outputs: ci-test, kernels, build-and-copy, build-and-upload. Scripts are
# plain text; the only values in them are store paths, variant names (checked
# by util.checkVariantName) and strings passed through util.shellQuote.
{ util, kernelnixSrc }:
{
  system,
  plan,
  toolchain,
  tests,
  # The toolchain's shell and PATH for building the scripts (buildTools).
  tools,
  # The variant whose environment the scripts without one (build-and-upload)
  # use: the ci-test variant, or null.
  ciVariant,
}:
let
  inherit (util) shellQuote;
  inherit (plan) hub;
  repoId = hub.repo-id;

  # Where a module the tests import comes from, per toolchain (MODULE: its name).
  missingModuleHint =
    if toolchain.name != "host" then
      "declare it in build.toml's python-depends, which the wheel lock holds (kernelnix lock-wheels)"
    else
      "install it into the host Python (python3 -m pip install MODULE, with that Python), or run `kernelnix generate` with a Python that has it";

  # The toolchain's script environment: one for all (host), or per variant.
  envFor = toolchain.scriptEnvFor or (variantName: toolchain.scriptEnv);

  # Shell assignments for the toolchain's script environment, then its setup.
  prelude =
    variantName:
    builtins.concatStringsSep "" (
      builtins.attrValues (builtins.mapAttrs (n: v: "${n}=${shellQuote "${v}"}\n") (envFor variantName))
    )
    + ''. "$hostEnv"'';

  # `clean`: the caller's LD_LIBRARY_PATH is dropped before the toolchain's
  # setup (ci-test, as the reference), which may set its own (hermetic).
  scriptFrom =
    clean: variantName: name: body:
    util.mkScript {
      inherit system name tools;
      text = ''
        #!/bin/sh
        set -eu
        ${if clean then "unset LD_LIBRARY_PATH" else ""}
        ${prelude variantName}
        ${body}
      '';
    };
  script = scriptFrom false;
in
{
  # `nix run .#ciTests.<variant>`: pytest -m kernels_ci on tests/ against the
  # built variant; exit 5 (no test selected) counts as a pass. Like the
  # reference, the variant directory is on PYTHONPATH and in LOCAL_KERNELS;
  # KERNEL_PATH (the variant's output) lets tests use kernels.get_local_kernel.
  # Beyond the reference, a directory linking the variant under the kernel's
  # package name comes first on PYTHONPATH, so `import <python-name>` in a test
  # imports the built variant. A test that fails for a missing module gets a
  # line naming the module and where to add it.
  #
  # A variant built in an environment of its own (the host toolchain's locked
  # wheels: `wheelEnv`) is tested in it, its Torch first on PYTHONPATH, as its
  # import check loaded it, with its python-depends (`dependsEnv`) after it, and
  # a tvm-ffi variant's Torch for its tests (`testEnv`, wheels.nix) after those. A
  # CPU variant's environment holds Torch's CUDA wheel (PyPI has no CPU one), so
  # the loader is told to ask for the CPU backend (kernelnix.checks.ci_backend),
  # as users of a CUDA Torch do.
  ciTest =
    variantName: variant:
    let
      environment = variant.wheelEnv or null;
      testEnv = variant.testEnv or null;
      depends = variant.dependsEnv or null;
      alternatives = variant.dependsAlternatives or [ ];
      backend = plan.variants.${system}.${variantName}.backend;
      askCpu = environment != null && backend == "cpu";
      pathWith =
        dependsPath:
        builtins.concatStringsSep ":" (
          [
            "$packages"
            "${variant}/${variantName}"
          ]
          ++ (if environment == null then [ ] else [ "${environment}" ])
          ++ (if depends == null then [ ] else [ dependsPath ])
          ++ (if testEnv == null then [ ] else [ "${testEnv}" ])
          ++ (if askCpu then [ "${kernelnixSrc}" ] else [ ])
        );
      pythonPath = pathWith "$depends";
      # The loader finds the kernel itself and its kernel dependencies here.
      localKernels = builtins.concatStringsSep ":" (
        builtins.filter (entry: entry != "") [
          (if repoId == null then "" else "${repoId}=${variant}")
          (variant.localKernels or "")
        ]
      );
      # Where the lock holds other releases of the python-depends, the tests run
      # with the first the package imports with, as its import check chose.
      chooseDepends =
        if alternatives == [ ] then
          ""
        else
          ''
            for candidate in ${depends} ${builtins.concatStringsSep " " (map toString alternatives)}; do
              if PYTHONPATH="${pathWith "$candidate"}" "$KERNELNIX_PYTHON" -c ${shellQuote "import ${plan.python-name}"} >/dev/null 2>&1; then
                depends=$candidate
                break
              fi
            done
            echo "ci-test: python-depends from $depends"
          '';
    in
    if tests == null then
      script variantName "ci-test" ''echo "ci-test: no tests/ directory; nothing to run"''
    else
      scriptFrom true variantName "ci-test" ''
        packages=$(mktemp -d)
        trap 'rm -rf "$packages"' EXIT
        ln -s ${variant}/${variantName} "$packages"/${shellQuote plan.python-name}
        ${if depends == null then "" else "depends=${depends}"}
        ${chooseDepends}
        export PYTHONPATH="${pythonPath}" KERNEL_PATH=${variant} PYTHONDONTWRITEBYTECODE=1
        ${if localKernels == "" then "" else "export LOCAL_KERNELS=${shellQuote localKernels}"}
        ${if askCpu then "export KERNELNIX_CI_BACKEND=cpu" else ""}
        cd ${tests}
        {
          status=0
          "$KERNELNIX_PYTHON" -m pytest ${tests}/tests -m kernels_ci -p no:cacheprovider \
            ${if askCpu then "-p kernelnix.checks.ci_backend " else ""}-o 'markers=kernels_ci: tests run against a built variant' "$@" || status=$?
          echo "$status" > "$packages/status"
        } 2>&1 | tee "$packages/log"
        status=$(cat "$packages/status")
        if [ "$status" -eq 5 ]; then
          echo "ci-test: no kernels_ci tests selected"
          exit 0
        fi
        if [ "$status" -ne 0 ]; then
          "$KERNELNIX_PYTHON" - "$packages/log" ${shellQuote missingModuleHint} <<'EOF'
        import re, sys
        log, hint = open(sys.argv[1], errors="replace").read(), sys.argv[2]
        for module in sorted(set(re.findall(r"No module named '([^'.]+)", log))):
            print(f"ci-test: the tests import {module!r}, which {sys.executable} lacks; "
                  + hint.replace("MODULE", module))
        EOF
        fi
        exit "$status"
      '';

  # `nix run .#kernels -- ...`: the `kernels` command of the toolchain's Python
  # (kernel-builder's `kernels` output).
  kernels = script ciVariant "kernels" ''
    exec "$KERNELNIX_PYTHON" -c 'import sys; from kernels.cli import main; sys.argv[0] = "kernels"; sys.exit(main())' "$@"
  '';

  # `nix run .#build-and-copy`: the bundle's variants into ./build, writable.
  buildAndCopy =
    bundle:
    script ciVariant "build-and-copy" ''
      mkdir -p build
      for entry in ${bundle}/*; do
        [ -e "$entry" ] || continue
        name=$(basename "$entry")
        rm -rf "build/$name"
        cp -r "$entry" "build/$name"
        echo "build/$name"
      done
      chmod -R +w build
    '';

  # `nix run .#build-and-upload [-- --dry-run ...]`, in the kernel directory:
  # build-and-copy, then `kernelnix upload` of the bundle's store path (exactly
  # what was built, whatever ./result or ./build held) to the Hub repo of
  # build.toml; upload checks every variant under the publishing policy.
  buildAndUpload =
    bundle: buildAndCopy:
    script ciVariant "build-and-upload" (
      if repoId == null then
        throw "kernelnix: build-and-upload needs the Hub repo: set `repo-id` under [general.hub] in build.toml, then run `kernelnix generate`"
      else
        ''
          ${buildAndCopy}/bin/build-and-copy
          export PYTHONPATH=${kernelnixSrc}
          exec "$KERNELNIX_PYTHON" -m kernelnix upload --repo-id ${shellQuote repoId} ${
            if hub.branch != null then "--branch ${shellQuote hub.branch} " else ""
          }--variants-from ${bundle} "$@" .
        ''
    );
}
