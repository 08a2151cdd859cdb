"""The build step end to end: real compiles, loaded through the `kernels` loader.

Builds are shared per session (compiling against Torch's headers takes a
minute per kernel on two cores); each example is copied and committed to a
throw-away git repository so its op namespace is stable across builds.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from click.testing import CliRunner
from fresh_python import run_python
from handmade import committed_copy, plan_here, relu_with_shared_sources
from paths import EXAMPLE_COPY_IGNORE, EXAMPLES

from kernelnix.cli import main
from kernelnix.compile import BuildError, build_variant, local
from kernelnix.compile.develop import create_pyproject
from kernelnix.compile.local import BUILD_DIR, WORK_DIR, build_planned
from kernelnix.config import load_config
from kernelnix.core.diagnostics import UserError
from kernelnix.host.environments import LockedEnvironment
from kernelnix.plan.build import PlanOptions, build_plan
from kernelnix.plan.model import PLAN_FILE

SYSTEM = "x86_64-linux"
CPU = "torch213-cxx11-cpu-x86_64-linux"
STABLE_CPU = "torch-stable-abi212-cpu-x86_64-linux"

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("cmake") is None, reason="cmake is not installed"),
]


def script(*parts: str) -> str:
    """Python source from indented snippets."""
    return "\n".join(textwrap.dedent(part) for part in parts)


@pytest.fixture(scope="session")
def built_kernels(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """relu, multi-kernel, relu-stable-abi and relu-noarch, built once with -j2."""
    root = tmp_path_factory.mktemp("kernels")
    built = {}
    for example in ("relu", "multi-kernel", "relu-stable-abi", "relu-noarch"):
        copy = committed_copy(example, root)
        build_planned(plan_here(copy), copy, jobs=2)
        built[example] = copy
    return built


LOAD = """
    import sys
    from pathlib import Path
    import torch
    import torch.nn.functional as F
    from kernels import get_local_kernel

    kernel = get_local_kernel(Path(sys.argv[1]))
    print(kernel.__name__)
"""

RELU_CHECK = """
    for dtype in (torch.float32, torch.float64, torch.bfloat16, torch.float16):
        x = torch.randn(1000, dtype=torch.float32).to(dtype)
        torch.testing.assert_close(kernel.relu(x), F.relu(x), rtol=0, atol=0)
    x = torch.tensor([float("nan"), -0.0, -1.0, 2.0])
    torch.testing.assert_close(kernel.relu(x), F.relu(x), rtol=0, atol=0, equal_nan=True)
"""


def variant_files(variant_dir: Path) -> set[str]:
    return {p.relative_to(variant_dir).as_posix() for p in variant_dir.rglob("*")}


def test_relu_builds_loads_and_computes(built_kernels: dict[str, Path]) -> None:
    build = built_kernels["relu"] / BUILD_DIR
    variant = build / CPU
    metadata = json.loads((variant / "metadata.json").read_text())
    ops_id = metadata["id"]
    assert variant_files(variant) == {
        "__init__.py",
        "_ops.py",
        "metadata.json",
        f"{ops_id}.abi3.so",
    }
    assert sorted(p.name for p in build.iterdir()) == [WORK_DIR, CPU]
    # build --local builds for publishing: the glibc 2.27 target, the publishing policy.
    assert metadata["provenance"]["kernelnix"] == {
        "toolchain": "host",
        "redistributable": True,
        "policy": "kernel",  # the one its checks applied
    }
    assert metadata["provenance"]["kernel"]["dirty"] is False
    assert metadata["backend"] == {"type": "cpu"}
    assert run_python(script(LOAD, RELU_CHECK), str(build)).strip() == ops_id
    # The build never writes into the kernel's sources.
    assert not (built_kernels["relu"] / "torch-ext" / "registration.h").exists()
    assert not (built_kernels["relu"] / "torch-ext" / "relu" / "_ops.py").exists()


def test_library_flags_and_exports(built_kernels: dict[str, Path]) -> None:
    work = built_kernels["relu"] / BUILD_DIR / WORK_DIR / CPU / "build"
    commands = json.loads((work / "compile_commands.json").read_text())
    ops_id = json.loads((built_kernels["relu"] / BUILD_DIR / CPU / "metadata.json").read_text())[
        "id"
    ]
    for command in commands:
        for flag in ("-DPy_LIMITED_API=0x03090000", "-fno-gnu-unique", "-DCPU_KERNEL"):
            assert flag in command["command"]
        assert f"-DTORCH_EXTENSION_NAME={ops_id}" in command["command"]
    library = built_kernels["relu"] / BUILD_DIR / CPU / f"{ops_id}.abi3.so"
    dynamic = subprocess.run(
        ["readelf", "--dyn-syms", "-d", "-W", library], capture_output=True, text=True, check=True
    ).stdout
    assert f"PyInit_{ops_id}" in dynamic
    assert "libtorch_python" not in dynamic
    assert "RPATH" not in dynamic and "RUNPATH" not in dynamic


def test_multi_kernel_flags_stay_on_their_kernel(built_kernels: dict[str, Path]) -> None:
    build = built_kernels["multi-kernel"] / BUILD_DIR
    commands = json.loads((build / WORK_DIR / CPU / "build" / "compile_commands.json").read_text())
    avx2 = {Path(c["file"]).name: "-mavx2 -mfma" in c["command"] for c in commands}
    assert avx2 == {
        "torch_binding.cpp": False,
        "silu_avx2.cpp": True,
        "silu_portable.cpp": False,
        "scale.cpp": False,
    }
    check = """
        x = torch.randn(4097)
        torch.testing.assert_close(kernel.silu(x), F.silu(x), rtol=1e-5, atol=1e-6)
        torch.testing.assert_close(kernel.scale(x, 2.5), x * 2.5)
        assert kernel.silu_variant() in ("avx2", "portable")
    """
    run_python(script(LOAD, check), str(build))


def test_noarch_variants_load(built_kernels: dict[str, Path]) -> None:
    build = built_kernels["relu-noarch"] / BUILD_DIR
    names = sorted(p.name for p in build.iterdir())
    assert names == ["torch-cpu", "torch-cuda", "torch-rocm", "torch-xpu"]
    assert variant_files(build / "torch-cpu") == {"__init__.py", "_ops.py", "metadata.json"}
    check = """
        assert kernel._ops._OPS_NAME == kernel.__name__  # the torch-cpu variant's id
    """
    run_python(script(LOAD, RELU_CHECK, check), str(build))


def test_stable_abi_variant_loads(built_kernels: dict[str, Path]) -> None:
    build = built_kernels["relu-stable-abi"] / BUILD_DIR
    commands = (build / WORK_DIR / STABLE_CPU / "build" / "compile_commands.json").read_text()
    assert "-DTORCH_TARGET_VERSION=0x020c000000000000" in commands
    assert "csrc/api/include" not in commands
    run_python(script(LOAD, RELU_CHECK), str(build))


def test_two_op_namespaces_load_in_one_process(
    built_kernels: dict[str, Path], tmp_path: Path
) -> None:
    source = built_kernels["relu-stable-abi"]
    plan = plan_here(source)
    outs = []
    for unique in ("first", "second"):
        out = tmp_path / unique
        build_variant(plan, SYSTEM, STABLE_CPU, source, out, unique_id=unique, jobs=2)
        outs.append(out)
    check = """
        import sys
        from pathlib import Path
        import torch
        import torch.nn.functional as F
        from kernels import get_local_kernel

        first, second = (get_local_kernel(Path(p)) for p in sys.argv[1:])
        assert first.__name__ == "_relu_stable_abi_cpu_first", first.__name__
        assert second.__name__ == "_relu_stable_abi_cpu_second", second.__name__
        x = torch.randn(64)
        for kernel in (first, second):
            torch.testing.assert_close(kernel.relu(x), F.relu(x), rtol=0, atol=0)
        out = torch.empty_like(x)
        torch.ops._relu_stable_abi_cpu_first.relu(out, x)
        torch.ops._relu_stable_abi_cpu_second.relu(out, x)
    """
    run_python(script(check), *map(str, outs))


def test_build_variant_command(tmp_path: Path) -> None:
    source = EXAMPLES / "relu-noarch"
    plan_file = tmp_path / PLAN_FILE
    plan_file.write_text(build_plan(load_config(source), PlanOptions()).to_json())
    out = tmp_path / "out"
    args = ["build-variant", "--plan", str(plan_file), "--variant", "torch-cpu"]
    args += ["--source", str(source), "--out", str(out), "--unique-id", "nix-rev"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    metadata = json.loads((out / "torch-cpu" / "metadata.json").read_text())
    assert metadata["id"] == "_relu_noarch_cpu_nix_rev"
    assert "nix_rev" in (out / "torch-cpu" / "_ops.py").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["torch-cpu"]
    bad = CliRunner().invoke(main, [*args[:4], "torch-nope", *args[5:]])
    assert bad.exit_code == 2
    assert "torch-cpu" in bad.output


@pytest.mark.parametrize(
    ("revision", "kernel"),
    [
        ("0123456789abcdef0123456789abcdef01234567", False),
        ("0123456789abcdef0123456789abcdef01234567-dirty", True),
        ("0123456789abcdef" * 4, False),  # a SHA-256 repository's
        ("0123456789ABCDEF0123456789ABCDEF01234567", False),  # recorded lowercase
        ("", None),
    ],
)
def test_build_variant_records_the_kernel_commit_it_is_given(
    tmp_path: Path, revision: str, kernel: bool | None
) -> None:
    """The plan's commit is from when it was written; Nix passes the one it builds."""
    source = committed_copy("relu-noarch", tmp_path)
    plan_file = tmp_path / PLAN_FILE
    plan_file.write_text(build_plan(load_config(source), PlanOptions()).to_json())
    recorded = json.loads(plan_file.read_text())["kernel-git"]["commit"]
    out = tmp_path / "out"
    args = ["build-variant", "--plan", str(plan_file), "--variant", "torch-cpu"]
    args += ["--source", str(source), "--out", str(out), "--kernel-git", revision]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    provenance = json.loads((out / "torch-cpu" / "metadata.json").read_text())["provenance"]
    commit = revision.removesuffix("-dirty").lower()
    expected = None if kernel is None else {"commit": commit, "dirty": kernel}
    assert provenance.get("kernel") == expected
    assert recorded != commit
    assert "kernel-builder" in provenance


def test_build_local_writes_the_plan_for_the_build_steps_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every variant built in its wheel environment runs `build-variant --plan FILE`
    in a process of its own: one file, written once per run. The environments and
    the processes are left out (every CPU variant is built, all in the same
    environment, and the commands are recorded, not run): what is checked is the
    file each step is given."""
    kernel = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=EXAMPLE_COPY_IGNORE)
    plan = plan_here(kernel)
    environment = LockedEnvironment(key="2.13-cpu", torch="2.13.0", wheels=())
    seen: list[tuple[str, int, int]] = []

    def record(command: list[str], **_: object) -> subprocess.CompletedProcess[str]:
        plan_file = Path(command[command.index("--plan") + 1])
        assert plan_file.read_text() == plan.to_json()
        status = plan_file.stat()
        seen.append((str(plan_file), status.st_ino, status.st_mtime_ns))
        return subprocess.CompletedProcess(command, 0)

    # The CPU variants, each of them in its environment.
    monkeypatch.setattr(
        local, "why_not_buildable", lambda v: None if v.backend == "cpu" else "not here"
    )
    monkeypatch.setattr(local, "locked_environment", lambda variant: environment)
    monkeypatch.setattr(local, "materialize", lambda environment, log: tmp_path / "env")
    monkeypatch.setattr(local, "run_shown", record)
    result = build_planned(plan, kernel)
    assert len(seen) == len(result.built) > 1
    assert len(set(seen)) == 1, seen


@pytest.mark.parametrize(
    "revision",
    [
        "main; rm -rf /",
        "0123456",  # short: the loader refuses metadata.json with it
        "0123456789abcdef0123456789abcdef0123456",
        "0123456789abcdef0123456789abcdef012345678",
        "0123456789abcdef0123456789abcdef01234567-modified",
    ],
)
def test_build_variant_refuses_a_revision_the_loader_would_not_read(
    tmp_path: Path, revision: str
) -> None:
    source = EXAMPLES / "relu-noarch"
    plan_file = tmp_path / PLAN_FILE
    plan_file.write_text(build_plan(load_config(source), PlanOptions()).to_json())
    args = ["build-variant", "--plan", str(plan_file), "--variant", "torch-cpu", "--source"]
    args += [str(source), "--out", str(tmp_path / "out"), "--kernel-git", revision]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert f"invalid kernel revision {revision!r}: expected a full git commit" in result.output
    assert "Traceback" not in result.output
    assert not (tmp_path / "out").exists()


def test_a_failed_build_leaves_nothing(tmp_path: Path) -> None:
    kernel = tmp_path / "broken"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("build"))
    for source in ("relu_cpu/relu_cpu.cpp", "torch-ext/torch_binding.cpp"):
        (kernel / source).write_text('#error "broken on purpose"\n')
    plan = plan_here(kernel)
    out = tmp_path / "out"
    with pytest.raises(BuildError, match="exited with status"):
        build_variant(plan, SYSTEM, CPU, kernel, out, jobs=2)
    assert list(out.iterdir()) == []


def test_the_kernels_csrc_is_on_every_sources_include_path(tmp_path: Path) -> None:
    """As in kernel-builder's extension target: a binding includes a header of csrc/
    by its bare name (kernels-community's megablocks: "cumsum.h")."""
    kernel = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("build"))
    (kernel / "csrc").mkdir()
    (kernel / "torch-ext" / "torch_binding.h").rename(kernel / "csrc" / "torch_binding.h")
    config = kernel / "build.toml"
    config.write_text(
        config.read_text().replace('"torch-ext/torch_binding.h"', '"csrc/torch_binding.h"')
    )
    built = build_variant(plan_here(kernel), SYSTEM, CPU, kernel, tmp_path / "out", jobs=2)
    assert any(built.glob("*.abi3.so"))


def test_a_source_below_the_root_finds_registration_h_in_torch_ext(tmp_path: Path) -> None:
    """kernel-builder writes registration.h into torch-ext/; a binding one folder
    down includes "../torch-ext/registration.h" (kernels-community's flash-attn3)."""
    kernel = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("build"))
    (kernel / "binding").mkdir()
    text = (kernel / "torch-ext" / "torch_binding.cpp").read_text()
    (kernel / "binding" / "torch_binding.cpp").write_text(
        text.replace('"registration.h"', '"../torch-ext/registration.h"').replace(
            '"torch_binding.h"', '"../torch-ext/torch_binding.h"'
        )
    )
    (kernel / "torch-ext" / "torch_binding.cpp").unlink()
    config = kernel / "build.toml"
    config.write_text(
        config.read_text().replace('"torch-ext/torch_binding.cpp"', '"binding/torch_binding.cpp"')
    )
    built = build_variant(plan_here(kernel), SYSTEM, CPU, kernel, tmp_path / "out", jobs=2)
    assert any(built.glob("*.abi3.so"))
    assert not (kernel / "torch-ext" / "registration.h").exists()


def test_a_kernel_of_headers_only_builds(tmp_path: Path) -> None:
    """A kernel table listing headers alone (kernels-community's sage-attention: _qattn,
    whose headers the other kernels include) compiles nothing and links in."""
    kernel = tmp_path / "relu"
    shutil.copytree(EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("build"))
    (kernel / "relu_cpu" / "shared.h").write_text("#pragma once\n")
    with (kernel / "build.toml").open("a") as config:
        config.write(
            '\n[kernel.relu_headers]\nbackend = "cpu"\ndepends = ["torch"]\n'
            'src = ["relu_cpu/shared.h"]\n'
        )
    built = build_variant(plan_here(kernel), SYSTEM, CPU, kernel, tmp_path / "out", jobs=2)
    assert any(built.glob("*.abi3.so"))


def test_a_source_two_kernels_list_compiles_once_with_both_kernels_flags(
    tmp_path: Path,
) -> None:
    """As in kernel-builder's one extension target: compiled twice, its symbols would
    be defined twice and the link would fail."""
    kernel = relu_with_shared_sources(
        tmp_path,
        '\n[kernel.relu_second]\nbackend = "cpu"\ndepends = ["torch"]\n'
        'src = ["relu_cpu/relu_cpu.cpp", "relu_cpu/second.h"]\n'
        'cxx-flags = ["-DKERNELNIX_SECOND=1"]\n',
    )
    work = tmp_path / "work"
    built = build_variant(
        plan_here(kernel), SYSTEM, CPU, kernel, tmp_path / "out", jobs=2, work_dir=work
    )
    assert any(built.glob("*.abi3.so"))
    commands = json.loads((work / "build" / "compile_commands.json").read_text())
    shared = [c["command"] for c in commands if c["file"].endswith("relu_cpu/relu_cpu.cpp")]
    assert len(shared) == 1 and "-DKERNELNIX_SECOND=1" in shared[0]


def test_variants_this_machine_cannot_build_say_why(tmp_path: Path) -> None:
    plan = plan_here(EXAMPLES / "relu")
    with pytest.raises(UserError) as caught:
        build_variant(plan, SYSTEM, "torch212-cxx11-cpu-x86_64-linux", EXAMPLES / "relu", tmp_path)
    assert "needs Torch 2.12; Torch 2.13 is installed" in caught.value.render()
    with pytest.raises(UserError) as caught:
        build_variant(
            plan, SYSTEM, "torch213-cxx11-cu130-x86_64-linux", EXAMPLES / "relu", tmp_path
        )
    assert "needs a Torch built for cuda" in caught.value.render()
    assert list(tmp_path.iterdir()) == []


def test_build_local_with_an_unknown_variant_lists_the_valid_ones() -> None:
    unknown = CliRunner().invoke(
        main, ["build", "--local", str(EXAMPLES / "relu"), "--variant", "x"]
    )
    assert unknown.exit_code == 2
    assert CPU in unknown.output
    assert "Traceback" not in unknown.output


def test_build_variant_rejects_a_file_that_is_no_plan(tmp_path: Path) -> None:
    args = ["--variant", CPU, "--source", str(EXAMPLES / "relu"), "--out", str(tmp_path / "o")]
    for text, message in (("nope", "not a plan file"), ('{"schema-version": 0}', "plan schema")):
        plan_file = tmp_path / "plan.json"
        plan_file.write_text(text)
        result = CliRunner().invoke(main, ["build-variant", "--plan", str(plan_file), *args])
        assert result.exit_code == 2
        assert message in result.output
    assert not (tmp_path / "o").exists()


def test_development_build_through_setup_py(built_kernels: dict[str, Path]) -> None:
    """create-pyproject's setup.py builds this machine's variant (here: again,
    incrementally, the relu CPU variant), puts the library and _ops.py into the
    package and the compile database where clangd looks. Runs last: it writes
    into the copy's sources, as an editable install does."""
    kernel = built_kernels["relu"]
    create_pyproject(kernel)
    subprocess.run(
        [sys.executable, "setup.py", "-q", "build_ext", "--inplace"], cwd=kernel, check=True
    )
    package = kernel / "torch-ext" / "relu"
    assert len(list(package.glob("_relu_cpu_*.abi3.so"))) == 1
    assert (kernel / BUILD_DIR / "compile_commands.json").is_file()
    check = """
        import sys
        import torch
        import torch.nn.functional as F

        sys.path.insert(0, sys.argv[1])
        import relu as kernel
    """
    run_python(script(check, RELU_CHECK), str(kernel / "torch-ext"))


def test_a_kernel_with_unlocked_kernel_depends_is_refused_before_building(
    tmp_path: Path,
) -> None:
    project = tmp_path / "scaled-relu"
    shutil.copytree(EXAMPLES / "scaled-relu", project, ignore=EXAMPLE_COPY_IGNORE)
    variant = "torch213-cxx11-cpu-x86_64-linux"
    result = CliRunner().invoke(main, ["build", "--local", str(project), "--variant", variant])
    assert result.exit_code == 2, result.output
    assert "kernels.lock is missing; run `kernelnix lock`" in result.output
    assert not (project / "build" / variant).exists()
