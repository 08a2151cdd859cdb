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
}:
let
  inherit (util) shellQuote;
  inherit (plan) hub;
  repoId = hub.repo-id;
  testEnvOf = import ./test-env.nix { inherit kernelnixSrc; } { inherit plan system; };

  # Where a module the tests import comes from, per toolchain (MODULE: its name).
  missingModuleHint =
    if toolchain.name != "host" then
      "declare it in build.toml's python-depends, which the wheel lock holds (kernelnix lock-wheels)"
    else
      "install it into the host Python (python3 -m pip install MODULE, with that Python), or run `kernelnix generate` with a Python that has it";

  # Shell assignments for the toolchain's script environment of this system (the
  # system that runs the script, whatever system a noarch variant names), then
  # its setup.
  prelude =
    builtins.concatStringsSep "" (
      builtins.attrValues (
        builtins.mapAttrs (n: v: "${n}=${shellQuote "${v}"}\n") (toolchain.scriptEnv system)
      )
    )
    + ''. "$hostEnv"'';

  # `clean`: the caller's LD_LIBRARY_PATH is dropped before the toolchain's
  # setup (ci-test, as the reference), which may set its own (hermetic).
  scriptFrom =
    clean: name: body:
    util.mkScript {
      inherit system name tools;
      text = ''
        #!/bin/sh
        set -eu
        ${if clean then "unset LD_LIBRARY_PATH" else ""}
        ${prelude}
        ${body}
      '';
    };
  script = scriptFrom false;

  # Every backend but the CPU's runs its tests on a device
  # (kernelnix.checks.ci_device.needs_device).
  needsDevice = backend: backend != "cpu";
  # `python -m kernelnix.checks.ci_device MODE BACKEND ...` in the Torch the
  # variant's tests run in.
  deviceCheck =
    environment: mode: args:
    ''PYTHONPATH="${environment.devicePath}" "$KERNELNIX_PYTHON" -m kernelnix.checks.ci_device ${mode} ${environment.backend} ${args}'';
in
rec {
  # `nix run .#ciTests.<variant>`: pytest -m kernels_ci on tests/ against the
  # built variant (./test-env.nix); exit 5 (no test selected) counts as a pass.
  # KERNEL_PATH (the variant's output) lets tests use kernels.get_local_kernel.
  # Beyond the reference, a directory linking the variant under the kernel's
  # package name comes first on PYTHONPATH, so `import <python-name>` in a test
  # imports the built variant; a test that fails for a missing module gets a
  # line naming the module and where to add it; and a variant whose backend runs
  # on a device is tested only where its Torch sees one (looked for when the
  # script runs), else one sentence says so and the exit status is 2: its tests
  # would otherwise put CPU tensors into its device-only ops.
  ciTest =
    variantName: variant:
    let
      environment = testEnvOf variantName variant;
      inherit (environment) depends alternatives askCpu localKernels;
      pathWith = dependsPath: "$packages:${environment.pythonPath dependsPath}";
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
      script "ci-test" ''echo "ci-test: no tests/ directory; nothing to run"''
    else
      scriptFrom true "ci-test" ''
        ${if needsDevice environment.backend then "${deviceCheck environment "require" variantName} || exit $?" else ""}
        packages=$(mktemp -d)
        trap 'rm -rf "$packages"' EXIT
        ln -s ${variant}/${variantName} "$packages"/${shellQuote plan.python-name}
        ${if depends == null then "" else "depends=${depends}"}
        ${chooseDepends}
        export PYTHONPATH="${pathWith "$depends"}" KERNEL_PATH=${variant} PYTHONDONTWRITEBYTECODE=1
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

  # `nix run .#ci-test`: the tests of the best variant this machine can run.
  # `candidates` ({ name; variant; }, best first): the best variant of each
  # backend in the plan's ci-order, up to the first that needs no device. The
  # device is looked for when the script runs, in each candidate's own Torch:
  # the same flake output runs on machines with and without a GPU. With the
  # device, kernel-builder's choice; without, the next candidate, saying why.
  ciTestOf =
    candidates:
    let
      first = builtins.head candidates;
      count = builtins.length candidates;
      attempt =
        index: candidate:
        let
          environment = testEnvOf candidate.name candidate.variant;
          run = ''exec ${ciTest candidate.name candidate.variant}/bin/ci-test "$@"'';
          next = if index + 1 < count then (builtins.elemAt candidates (index + 1)).name else null;
        in
        if !(needsDevice environment.backend) then
          run
        else
          ''
            if why=$(${deviceCheck environment "probe" ""}); then
              ${run}
            fi
            ${
              if next == null then
                ''echo "ci-test: $why, and every variant of" ${shellQuote plan.name} "offered here needs one: nothing to test on this machine" >&2; exit 2''
              else
                ''echo "ci-test: $why; testing ${next}"''
            }
          '';
    in
    if count == 1 && !(needsDevice (testEnvOf first.name first.variant).backend) then
      ciTest first.name first.variant
    else
      script "ci-test" (builtins.concatStringsSep "\n" (builtins.genList (i: attempt i (builtins.elemAt candidates i)) count));

  # `nix run .#kernels -- ...`: the `kernels` command of the toolchain's Python
  # (kernel-builder's `kernels` output).
  kernels = script "kernels" ''
    exec "$KERNELNIX_PYTHON" -c 'import sys; from kernels.cli import main; sys.argv[0] = "kernels"; sys.exit(main())' "$@"
  '';

  # `nix run .#build-and-copy`: the bundle's variants into ./build, writable.
  buildAndCopy =
    bundle:
    script "build-and-copy" ''
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
    script "build-and-upload" (
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
