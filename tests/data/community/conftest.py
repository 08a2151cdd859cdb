# kernels-community kernels with their own tests, which `nix run .#ci-test` runs
# against a built kernel (tests/e2e/test_community_kernels.py); this suite does
# not collect them.
collect_ignore_glob = ["*/tests/*"]
