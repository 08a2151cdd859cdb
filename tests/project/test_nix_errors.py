"""Nix failures explained in one line with the fix (kernelnix/data/nix-errors.json),
each against the message the real Nix on this machine prints."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest
from nix_projects import git

from kernelnix.core.diagnostics import UserError
from kernelnix.project.nix import explain_nix_error, nix_command, nix_error_hints, run

pytestmark = pytest.mark.skipif(shutil.which("nix") is None, reason="needs Nix")

EMPTY_REGISTRY = {"version": 2, "flakes": []}


def nix_stderr(cwd: Path, *args: str, tmp_path: Path) -> str:
    """What `nix <args>` prints on stderr when it fails, with an empty flake registry."""
    registry = tmp_path / "registry.json"
    registry.write_text(json.dumps(EMPTY_REGISTRY))
    done = subprocess.run(
        ["nix", "--option", "flake-registry", str(registry), *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "XDG_CONFIG_HOME": str(tmp_path)},
        check=False,
    )
    assert done.returncode != 0, done.stdout
    return done.stderr


def flake(directory: Path, text: str, track: bool = True) -> Path:
    directory.mkdir()
    git(directory, "init", "-q")
    (directory / "flake.nix").write_text(text)
    if track:
        git(directory, "add", "flake.nix")
    return directory


def meaning(stderr: str) -> str:
    explained = explain_nix_error(stderr)
    assert explained is not None, stderr
    assert explained.fix
    return explained.message


def test_an_unregistered_kernelnix_input(tmp_path: Path) -> None:
    project = flake(
        tmp_path / "k",
        '{ inputs.kernelnix.url = "kernelnix"; outputs = { self, kernelnix }: { x = 1; }; }',
    )
    stderr = nix_stderr(project, "eval", ".#x", tmp_path=tmp_path)
    assert "registry name `kernelnix`" in meaning(stderr)


def test_a_file_git_does_not_track(tmp_path: Path) -> None:
    project = flake(
        tmp_path / "k", "{ outputs = { self }: { x = builtins.readFile ./data.txt; }; }"
    )
    (project / "data.txt").write_text("untracked\n")
    stderr = nix_stderr(project, "eval", ".#x", tmp_path=tmp_path)
    assert "git does not track it" in meaning(stderr)


def test_an_untracked_flake_nix(tmp_path: Path) -> None:
    project = flake(tmp_path / "k", "{ outputs = { self }: { x = 1; }; }", track=False)
    stderr = nix_stderr(project, "eval", ".#x", tmp_path=tmp_path)
    assert "git does not track it" in meaning(stderr)


def test_an_output_the_flake_lacks(tmp_path: Path) -> None:
    project = flake(tmp_path / "k", "{ outputs = { self }: { x = 1; }; }")
    stderr = nix_stderr(project, "eval", ".#torch299-cxx11-cpu-x86_64-linux", tmp_path=tmp_path)
    assert "the flake has no such output" in meaning(stderr)


def test_flakes_disabled(tmp_path: Path) -> None:
    stderr = nix_stderr(
        tmp_path, "--option", "experimental-features", "", "eval", ".#x", tmp_path=tmp_path
    )
    assert "`nix-command` and `flakes`" in meaning(stderr)


def test_a_missing_build_users_group(tmp_path: Path) -> None:
    expression = (
        'derivation { name = "kernelnix-test"; system = builtins.currentSystem; '
        'builder = "/bin/sh"; args = [ "-c" "echo > $out" ]; }'
    )
    stderr = nix_stderr(
        tmp_path,
        "--option",
        "build-users-group",
        "kernelnix-no-such-group",
        "build",
        "--impure",
        "--no-link",
        "--expr",
        expression,
        tmp_path=tmp_path,
    )
    assert "build users group is missing" in meaning(stderr)


def test_a_full_disk() -> None:
    # Not reproducible here without filling a disk: the message of Nix's store writes.
    stderr = "error: writing to file: No space left on device\n"
    assert "is full" in meaning(stderr)


def no_op(system: str, name: str) -> str:
    """A derivation of `system` that Nix refuses before it runs anything."""
    return (
        f'derivation {{ name = "{name}"; system = "{system}"; builder = "/bin/sh";'
        ' args = [ "-c" "echo > $out" ]; }'
    )


def test_an_object_of_another_system(tmp_path: Path) -> None:
    expression = no_op("aarch64-linux", "kernel-variant-a.cu.o")
    stderr = nix_stderr(
        tmp_path, "build", "--impure", "--no-link", "--expr", expression, tmp_path=tmp_path
    )
    explained = meaning(stderr)
    assert (
        "kernel-variant-a.cu.o is built on aarch64-linux, and neither this machine (x86_64-linux)"
        in explained
    )


def test_builders_of_another_system_only(tmp_path: Path) -> None:
    expression = no_op("x86_64-linux", "kernel-variant-b.cu.o")
    stderr = nix_stderr(
        tmp_path, "build", "--impure", "--no-link", "--max-jobs", "0",
        "--builders", "ssh-ng://nobody@127.0.0.1 riscv64-linux - 1", "--expr", expression,
        tmp_path=tmp_path,
    )  # fmt: skip
    assert "none of the builders Nix was given can build what is left" in meaning(stderr)


def test_a_builder_that_stopped_mid_object() -> None:
    # Nix 2.8's message when the daemon of an ssh-ng builder on 127.0.0.1 was killed
    # while it built a derivation (tests/e2e/test_objects.py kills one mid-object).
    stderr = (
        "building '/nix/store/lh5q967l6bhnhywb8ql938nc0jb0gls2-slow-object.o.drv' on "
        "'ssh-ng://root@127.0.0.1?remote-store=/tmp/w/rs&remote-program=/tmp/w/remote-daemon'...\n"
        "copying 0 paths...\n"
        "building '/nix/store/lh5q967l6bhnhywb8ql938nc0jb0gls2-slow-object.o.drv'...\n"
        "error: unexpected end-of-file\n"
        "error: builder for '/nix/store/lh5q967l6bhnhywb8ql938nc0jb0gls2-slow-object.o.drv' "
        "failed with exit code 1\n"
    )
    assert "the remote builder of slow-object.o ended" in meaning(stderr)


def test_nix_s_colours_do_not_hide_a_known_message() -> None:
    # As `kernelnix build` renders Nix's machine-readable log of an object build:
    # its messages keep their colours (seen when a builder's daemon was killed).
    drv = "/nix/store/ih3d21fg60slvgcw7sf8g8wgyy2h6vk7-f-v-fused_scale.cpp.o.drv"
    stderr = (
        "\x1b[31;1merror:\x1b[0m unexpected end-of-file\n"
        f"\x1b[31;1merror:\x1b[0m builder for '\x1b[35;1m{drv}\x1b[0m' failed with exit code 1\n"
    )
    assert "the remote builder of f-v-fused_scale.cpp.o ended" in meaning(stderr)


@pytest.mark.parametrize("print_logs", [True, False])
def test_an_object_killed_for_memory(print_logs: bool) -> None:
    # nvcc's own line when the kernel killed its cicc (produced here with kill -9),
    # as Nix shows a failed build's log: line by line with -L, else its last lines.
    killed = "nvcc error   : '\"$CICC_PATH/cicc\"' died due to signal 9 (Kill signal)"
    failed = (
        "error: builder for '/nix/store/lh5q967l6bhnhywb8ql938nc0jb0gls2-k-v-flash_bwd.cu.o.drv'"
        " failed with exit code 1"
    )
    stderr = (
        f"k-v-flash_bwd.cu.o> {killed}\n{failed}\n"
        if print_logs
        else f"{failed};\n       last 10 log lines:\n       > {killed}\n"
    )
    assert "the compile of k-v-flash_bwd.cu.o was killed (signal 9)" in meaning(stderr)


def test_unknown_failures_are_not_explained() -> None:
    assert (
        explain_nix_error("error: builder for '/nix/store/x.drv' failed with exit code 1") is None
    )
    assert len(nix_error_hints()) >= 6


def test_run_adds_the_explanation_and_exits_2(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    project = flake(tmp_path / "k", "{ outputs = { self }: { x = 1; }; }")
    with pytest.raises(UserError) as raised:
        run(nix_command("eval", f"{project}#nothing-here"))
    (diagnostic,) = raised.value.diagnostics
    assert diagnostic.message.startswith("nix failed: the flake has no such output")
    assert "does not provide attribute" in capfd.readouterr().err  # Nix's own message too


def test_run_exits_with_nix_status_on_unknown_failures(tmp_path: Path) -> None:
    project = flake(tmp_path / "k", '{ outputs = { self }: { x = throw "planted"; }; }')
    with pytest.raises(SystemExit) as raised:
        run(nix_command("eval", f"{project}#x"))
    assert raised.value.code == 1
