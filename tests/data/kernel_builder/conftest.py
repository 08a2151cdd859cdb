# The kernels here carry their own tests, which `nix run .#ci-test` runs against
# a built kernel (tests/e2e/test_kernel_builder_flakes.py); this suite does not
# collect them.
collect_ignore_glob = ["*/tests/*"]
