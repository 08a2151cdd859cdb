"""One verdict (issue #17): the build step, `check` and `upload` judge the same
tree the same way under the same policy, and each says which policy and why.

Trees: examples/relu's CPU variant, built by `kernelnix build --local
--host-glibc`, and relu-noarch's CPU variant, built by the build step
(`build_variant`, what `build-variant` and the Nix derivation run); both check
their variant under the policy of this machine's glibc and record it. The same
relu variant built by a plain `build --local` (the glibc 2.27 target, under the
publishing policy, which upload accepts). And a hand-made variant
holding a library of the checks corpus that needs GLIBC_2.34.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from checks_corpus.corpus import build_corpus
from click.testing import CliRunner
from handmade import make_variant, plan_here, plan_metadata
from paths import EXAMPLES

from kernelnix.checks import CheckOptions, run_checks
from kernelnix.cli import main
from kernelnix.compile.variant import build_policy, build_variant
from kernelnix.core.diagnostics import UserError
from kernelnix.host.machine import host_check_policy, why_not_buildable
from kernelnix.host.system import current_system
from kernelnix.publish.gate import checked_variants

pytestmark = pytest.mark.slow

POLICIES = ["kernel", "manylinux_2_28", "manylinux_2_34"]


def _built(example: str, root: Path) -> tuple[Path, str]:
    """The CPU variant of `example` built by the build step; and what it printed."""
    source = root / example
    shutil.copytree(EXAMPLES / example, source, ignore=shutil.ignore_patterns("build", "result"))
    plan = plan_here(source)
    system = current_system()
    name = next(
        n
        for n, v in plan.variants[system].items()
        if v.backend == "cpu" and why_not_buildable(v) is None
    )
    return build_variant(plan, system, name, source, root / "out", import_check=False), name


def _built_local(example: str, root: Path, *options: str) -> tuple[Path, str]:
    """`kernelnix build --local` of `example`'s CPU variant; the variant and the output."""
    source = root / example
    shutil.copytree(EXAMPLES / example, source, ignore=shutil.ignore_patterns("build", "result"))
    plan = plan_here(source)
    name = next(
        n
        for n, v in plan.variants[current_system()].items()
        if v.backend == "cpu" and why_not_buildable(v) is None
    )
    args = ["build", "--local", "--no-progress", *options, "--variant", name, str(source)]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    return source / "build" / name, result.output


BUILT_LOCAL: dict[str, str] = {}


@pytest.fixture(scope="module")
def trees(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("verdict")
    relu, BUILT_LOCAL["relu"] = _built_local("relu", root / "relu", "--host-glibc")
    target, BUILT_LOCAL["relu-glibc-2.27"] = _built_local("relu", root / "target")
    noarch, _ = _built("relu-noarch", root / "noarch")
    handmade = root / "handmade" / "build"
    name = "torch213-cxx11-cpu-x86_64-linux"
    metadata = plan_metadata("relu", name)
    library = build_corpus().path("glibc_234").read_bytes()
    files = {f"{metadata['id']}.abi3.so": library}
    return {
        "relu": relu,
        "relu-glibc-2.27": target,
        "relu-noarch": noarch,
        "glibc-2.34": make_variant(handmade, "relu", name, files=files, metadata=metadata),
    }


def _check_cli(variant: Path, *args: str) -> tuple[bool, str]:
    result = CliRunner().invoke(main, ["check", "--no-import", *args, str(variant)])
    assert result.exit_code in (0, 1), result.output
    return result.exit_code == 0, result.output


def _upload_accepts(variant: Path) -> bool:
    try:
        checked_variants(variant, CheckOptions(import_check=False))
    except UserError:
        return False
    return True


@pytest.mark.parametrize("tree", ["relu", "relu-glibc-2.27", "relu-noarch", "glibc-2.34"])
@pytest.mark.parametrize("policy", POLICIES)
def test_check_and_the_checks_agree_under_every_policy(
    trees: dict[str, Path], tree: str, policy: str
) -> None:
    variant = trees[tree]
    api = run_checks(variant, CheckOptions(policy=policy, import_check=False)).ok
    cli, output = _check_cli(variant, "--policy", policy)
    assert cli == api
    assert f"policy {policy} (chosen on the command line)" in output
    if policy == "kernel":
        assert _upload_accepts(variant) == api


def test_the_verdicts_differ_where_the_trees_do(trees: dict[str, Path]) -> None:
    """Not a vacuous agreement: each tree passes and fails where it should."""
    verdicts = {
        (tree, policy): run_checks(trees[tree], CheckOptions(policy=policy, import_check=False)).ok
        for tree in trees
        for policy in POLICIES
    }
    assert verdicts[("relu-noarch", "kernel")] and _upload_accepts(trees["relu-noarch"])
    assert not verdicts[("relu", "kernel")]  # --host-glibc: libstdc++.so.6, this glibc
    # The default build --local: the glibc 2.27 target, a private C++ runtime.
    assert verdicts[("relu-glibc-2.27", "kernel")] and _upload_accepts(trees["relu-glibc-2.27"])
    assert not verdicts[("glibc-2.34", "manylinux_2_28")]
    assert verdicts[("glibc-2.34", "manylinux_2_34")]


@pytest.mark.parametrize("tree", ["relu", "relu-noarch"])
def test_check_repeats_the_build_verdict_from_its_record(trees: dict[str, Path], tree: str) -> None:
    variant = trees[tree]
    policy, reason = build_policy(redistributable=False)
    assert policy == (host_check_policy() or "kernel")
    own = json.loads((variant / "metadata.json").read_text())["provenance"]["kernelnix"]
    assert (own["toolchain"], own["redistributable"], own["policy"]) == ("host", False, policy)
    ok, output = _check_cli(variant)
    assert ok  # the build passed its checks, so the record's verdict is a pass
    assert f"policy {policy} (the one the host-toolchain build passed" in output
    if policy != "kernel":  # built for this machine only: check says upload refuses it
        assert "which `upload` refuses: it holds every variant to policy kernel" in output
    assert "local" in output.splitlines()[0]  # redistributable: as recorded
    # build --local printed the same policy, with its reason, and a pass.
    if tree in BUILT_LOCAL:
        assert f"policy {policy} ({reason})" in BUILT_LOCAL[tree]
        assert f"ok    {variant.name}: no violations" in BUILT_LOCAL[tree]


def test_without_a_record_check_says_it_used_the_default(trees: dict[str, Path]) -> None:
    ok, output = _check_cli(trees["glibc-2.34"])
    assert not ok
    assert "policy kernel (the default policy: metadata.json records none)" in output
