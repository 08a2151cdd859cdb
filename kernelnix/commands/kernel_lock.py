"""`kernelnix lock`: resolve DIRECTORY/build.toml's kernel-depends on the Hub and write
DIRECTORY/kernels.lock (kernelnix.host.kernel_deps, kernelnix.plan.kernel_lock)."""

from __future__ import annotations

from pathlib import Path

import click

from kernelnix.cli import DIR_ARGUMENT, command, print_warnings, reports_user_errors
from kernelnix.config import load_config
from kernelnix.host.kernel_deps import Dependency, hub_api, lock_tree
from kernelnix.host.network import hub_requests
from kernelnix.plan.kernel_deps import ref_version
from kernelnix.plan.kernel_lock import FILES_LOCK_NAME, LOCK_NAME, write_files_lock, write_lock
from kernelnix.plan.variant_metadata import kernel_depends_for


@command("lock")
@DIR_ARGUMENT
@reports_user_errors
def lock_kernels(directory: Path) -> None:
    """Version N of a dependency is its repo's `vN` branch, locked to that branch's
    head; every variant's metadata.json is read and its own kernel-depends are locked
    too. Beside kernels.lock (the loader's format), DIRECTORY/kernelnix-kernels.json
    records the files of every variant of each locked kernel with their sha256: what
    the flake fetches (fixed-output) and `build --local` downloads. The Hub is
    HF_ENDPOINT (default huggingface.co); HF_TOKEN reaches private repositories and
    is never written.

    \b
    Examples:
      kernelnix lock
      HF_ENDPOINT=http://127.0.0.1:8080 kernelnix lock examples/relu
    """
    loaded = load_config(directory)
    print_warnings(loaded.warnings)
    config = loaded.config
    entries = [ref for b in config.backends for ref in kernel_depends_for(config, b)]
    roots = dict.fromkeys(Dependency(ref.repo_id, ref_version(ref)) for ref in entries)
    with hub_requests("resolve the kernel-depends of build.toml on the Hub"):
        tree = lock_tree(roots, hub_api())
    write_lock(directory / LOCK_NAME, tree.locks)
    write_files_lock(directory / FILES_LOCK_NAME, tree.files)
    click.echo(f"{directory / LOCK_NAME}: {len(tree.locks)} kernel(s) locked")
    click.echo(f"{directory / FILES_LOCK_NAME}: the files Nix and build --local fetch of them")
