"""One derivation per object (kernelFlake's objectBuild, docs/distributed.md)
against one derivation per variant, through the hermetic toolchain in the
sandbox, both with two cores in all (one step: `--cores 2`, Ninja's two jobs;
object by object: `--max-jobs 2 --cores 1`, two objects at once):

1. a cold build of fused-scale's cu130 variant (3 sources): target at most 1.10 x;
2. a cold build of a generated CPU kernel of 24 sources (each includes Torch's
   headers, as real kernels' do) plus its binding: target at most 1.05 x;
3. that kernel rebuilt after an edit of one source, object by object, against its
   cold build: target at most 2 / sources + the link's share (the variant step
   rebuilt alone, `nix build --rebuild`, over the cold build);
4. what a derivation costs: 20 derivations that do nothing, built here, and
   through an ssh-ng builder on 127.0.0.1 (`--max-jobs 0`), per derivation,
   against the cold object build of fused-scale (information, no target);
5. the huge kernels, predicted from benchmarks/data/huge-kernel-samples.json
   (benchmarks/sample_huge.py: real units of flash-attn2 and flash-attn3 compiled
   one object at a time) and, where a kernel was built fully,
   benchmarks/data/huge-kernel-builds.json (benchmarks/record_build.py: every
   object's time in that build): one variant's wall time on 1, 2, 8, 16 and 64
   builders of this machine's size; target for flash-attn3: 16 builders at least
   10 x faster than one.

Cold: the variant, its objects and its configured tree deleted from the store
before each build; the toolchain and the wheels stay.

    python benchmarks/bench_objects.py [--runs N]
"""

from __future__ import annotations

import heapq
import json
import os
import re
import shutil
import statistics
import sys
import tempfile
import textwrap
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_conformance import HUGE_KERNELS as HUGE_BEGIN
from bench_conformance import TABLE
from figures import Figure, Unavailable, duration, runs_main, timed

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "support"))

from nix_projects import git, kernelnix_clone, make_project, nix  # noqa: E402
from nix_remote import SSHD, remote_daemon, sshd  # noqa: E402
from paths import EXAMPLES  # noqa: E402

SYSTEM = "x86_64-linux"
CUDA = "torch213-cxx11-cu130-x86_64-linux"
CPU = "torch213-cxx11-cpu-x86_64-linux"
BUILD_SETS = ("2.13-cpu", "2.13-cuda-13")
SANDBOX = ("--option", "sandbox", "true", "--option", "sandbox-fallback", "false")
ONE_STEP = ("--cores", "2", "--max-jobs", "1")
BY_OBJECT = ("--cores", "1", "--max-jobs", "2")
HERMETIC = ("--toolchain", "hermetic", "--no-host-record")
GENERATED_SOURCES = 24
SAMPLES = Path(__file__).resolve().parent / "data" / "huge-kernel-samples.json"
BUILDS = Path(__file__).resolve().parent / "data" / "huge-kernel-builds.json"
BUILDERS = (1, 2, 8, 16, 64)
# This machine's size: objects at once per builder (two cores; the largest
# sampled object holds about 6 GB of its 24 GB).
SLOTS_PER_BUILDER = 2
NO_OPS = 20
HUGE_END = "<!-- end of the huge kernels -->"


@dataclass(frozen=True)
class Project:
    path: Path
    env: dict[str, str]

    def nix(self, *args: str) -> str:
        return nix(self.path, self.env, *args).stdout

    def outputs(self, variant: str) -> list[str]:
        """The variant's output, and its objects' and configured tree's when it has them."""
        apply = (
            "p: [ p.outPath ] ++ (if p ? objects then map (o: o.outPath) p.objects"
            " ++ [ p.configured.outPath ] else [ ])"
        )
        return list(json.loads(self.nix("eval", "--json", f".#{variant}", "--apply", apply)))

    def cold_build(self, variant: str, options: Sequence[str]) -> float:
        present = [p for p in self.outputs(variant) if Path(p).exists()]
        if present:
            self.nix("store", "delete", *present)
        return timed(lambda: self.nix("build", f".#{variant}", "--no-link", *SANDBOX, *options))


def committed_flake(path: Path, objects: bool) -> None:
    """flake.nix with objectBuild set (the default, null, would decide by the number
    of sources), committed and then edited, as an author's tree: its op namespace
    stays put while it is edited (docs/distributed.md)."""
    flake = path / "flake.nix"
    setting = "true" if objects else "false"
    flake.write_text(
        flake.read_text().replace("path = ./.;", f"path = ./.;\n      objectBuild = {setting};")
    )
    git(path, "add", "-A")
    git(path, "commit", "-qm", "kernel")
    (path / "README.md").write_text((path / "README.md").read_text() + "\nedited\n")


def generated_kernel(where: Path, sources: int) -> Path:
    """relu's CPU kernel and `sources` C++ files more, each a small op against
    Torch's headers: the shape of a real kernel of many sources."""
    kernel = where / "many-sources"
    shutil.copytree(
        EXAMPLES / "relu", kernel, ignore=shutil.ignore_patterns("relu_[a-bd-z]*", "build")
    )
    names = [f"part{i:02d}" for i in range(sources)]
    (kernel / "parts").mkdir()
    for name in names:
        (kernel / "parts" / f"{name}.cpp").write_text(
            "#include <torch/all.h>\n"
            f"torch::Tensor {name}(const torch::Tensor& x) {{\n"
            f"  return torch::relu(x * {len(name)}) + x.sum() * 0;\n}}\n"
        )
    listed = "".join(f'  "parts/{n}.cpp",\n' for n in names)
    (kernel / "build.toml").write_text(
        '[general]\nname = "relu"\nversion = 1\nedition = 5\nlicense = "Apache-2.0"\n'
        'backends = ["cpu"]\n\n[torch]\nsrc = ["torch-ext/torch_binding.cpp", '
        '"torch-ext/torch_binding.h"]\n\n[kernel.relu_cpu]\nbackend = "cpu"\n'
        'depends = ["torch"]\nsrc = ["relu_cpu/relu_cpu.cpp"]\n\n[kernel.parts]\n'
        f'backend = "cpu"\ndepends = ["torch"]\nsrc = [\n{listed}]\n'
    )
    return kernel


def projects(work: Path) -> dict[str, Project]:
    """fused-scale and the generated kernel, each one derivation per variant and
    object by object."""
    url, env = kernelnix_clone(work, BUILD_SETS)
    made = {}
    examples = (
        ("fused", EXAMPLES / "fused-scale"),
        ("many", generated_kernel(work, GENERATED_SOURCES)),
    )
    for name, example in examples:
        for mode in ("one-step", "objects"):
            path = make_project(example, work / f"{name}-{mode}", url, env, HERMETIC)
            committed_flake(path, objects=mode == "objects")
            made[f"{name}-{mode}"] = Project(path, env)
    return made


def no_op_expression(clone: Path, nonce: str) -> str:
    """NO_OPS derivations that write a line each, by the registry's shell."""
    registry = f"import {clone}/nix/registry {{ kernelnixSrc = {clone}; }}"
    derivation = (
        f'derivation {{ name = "no-op-${{toString n}}"; system = "{SYSTEM}"; builder = shell;'
        f' args = [ "-c" "echo {nonce} $n > $out" ]; inherit n; }}'
    )
    shell = f"({registry}).systems.{SYSTEM}.shell"
    return f"let shell = {shell}; in builtins.genList (n: {derivation}) {NO_OPS}"


def per_derivation(project: Project, clone: Path, work: Path) -> tuple[float, float | None]:
    """Seconds per no-op derivation built here, and through a builder on 127.0.0.1."""

    def build(env: dict[str, str], nonce: str, *options: str) -> float:
        expression = no_op_expression(clone, nonce)
        return timed(
            lambda: nix(
                project.path, env, "build", "--no-link", "--impure", *options, "--expr", expression
            )
        )

    here = build(project.env, uuid.uuid4().hex, *SANDBOX)
    if not SSHD.exists() or os.geteuid() != 0:
        return here / NO_OPS, None
    daemon = remote_daemon(work / "remote-daemon", [])
    with sshd(work / "ssh") as builder:
        machine = f"{builder.store_url(work / 'remote-store', daemon)} {SYSTEM} {builder.key} 2"
        env = {**project.env, "NIX_SSHOPTS": builder.ssh_options}
        remote_only = ("--max-jobs", "0", "--builders", machine)
        build(env, "warm", *remote_only)  # the builder's store gets the shell once
        remote = build(env, uuid.uuid4().hex, *remote_only)
    return here / NO_OPS, remote / NO_OPS


# --- the huge kernels, predicted ------------------------------------------------


def family(source: str) -> tuple[str, ...]:
    """A unit's family: direction, head dimension and arch, from its file name
    (flash_bwd_hdim256_bf16_sm90.cu: bwd, 256, sm90)."""
    name = Path(source).name
    direction = "bwd" if "_bwd_" in name else "fwd" if "_fwd" in name else name
    hdim = re.search(r"hdim(\d+)", name)
    arch = re.search(r"(sm\d+)", name)
    return (direction, hdim[1] if hdim else "", arch[1] if arch else "")


def unit_times(kernel: dict[str, Any]) -> tuple[list[float], int]:
    """Every unit's estimated seconds (a sampled unit's own; else the mean of the
    sampled units of its family, of its direction and arch, else of all), and
    how many units were sampled."""
    sampled = {s["source"]: float(s["cpu-seconds"]) for s in kernel["samples"]}
    by_family: dict[tuple[str, ...], list[float]] = {}
    for source, seconds in sampled.items():
        key = family(source)
        for depth in (3, 2, 0):
            by_family.setdefault(key[:depth] if depth != 2 else (key[0], key[2]), []).append(
                seconds
            )
    times = []
    for unit in kernel["units"]:
        if unit in sampled:
            times.append(sampled[unit])
            continue
        key = family(unit)
        for candidate in (key, (key[0], key[2]), ()):
            if candidate in by_family:
                times.append(statistics.mean(by_family[candidate]))
                break
    return times, len(sampled)


def makespan(times: Sequence[float], slots: int) -> float:
    """The wall time of `times` on `slots` at once, longest first (Nix starts what is
    ready; the longest-first order is the bound a scheduler can reach)."""
    heap = [0.0] * slots
    for seconds in sorted(times, reverse=True):
        heapq.heappush(heap, heapq.heappop(heap) + seconds)
    return max(heap)


def predicted(times: Sequence[float], builders: int, overhead: float, configure: float) -> float:
    """One variant's wall time on `builders` of this machine's size: its configure
    step, then its objects, each costing `overhead` more (a derivation's start)."""
    return configure + makespan([t + overhead for t in times], builders * SLOTS_PER_BUILDER)


@dataclass(frozen=True)
class VariantTimes:
    """Every unit's seconds in a published variant, and where they come from."""

    seconds: list[float]
    sampled: int  # units measured alone (benchmarks/sample_huge.py)
    built: int  # units timed in a full build of the variant
    arch_factor: int  # archs of the variant per arch sampled
    built_total: float  # the built units' seconds in all
    estimated_for_built: float  # what the samples estimated for them


def variant_times(kernel: dict[str, Any], built: dict[str, float]) -> VariantTimes:
    """Every unit's seconds in the published variant: its time in a full build of
    the variant, where one was recorded; else its sampled or estimated time, a
    CUDA unit's times the variant's archs per arch sampled (flash-attn2: sampled
    at one of its 4; its C++ units compile once whatever the archs)."""
    estimates, sampled = unit_times(kernel)
    archs = int(kernel["arch-factor"])
    scaled = {
        unit: estimate * (archs if unit.endswith(".cu") else 1)
        for unit, estimate in zip(kernel["units"], estimates, strict=True)
    }
    return VariantTimes(
        seconds=[built.get(unit, estimate) for unit, estimate in scaled.items()],
        sampled=sampled,
        built=sum(unit in built for unit in scaled),
        arch_factor=archs,
        built_total=sum(built.get(unit, 0.0) for unit in scaled),
        estimated_for_built=sum(scaled[unit] for unit in scaled if unit in built),
    )


def long_duration(seconds: float) -> str:
    """Hours or minutes, as a person reads a build's length."""
    return f"{seconds / 3600:.1f} h" if seconds >= 3600 else f"{seconds / 60:.0f} min"


def basis(times: VariantTimes, kernel: dict[str, Any]) -> str:
    """Where a prediction's unit times come from, in words."""
    if times.built == len(times.seconds):
        return f"all {times.built} timed in its full build"
    scaled = (
        f", each CUDA unit x {times.arch_factor} for the variant's archs "
        f"(sampled at {kernel['archs']})"
        if times.arch_factor > 1
        else ""
    )
    timed = f"{times.built} timed in its full build, " if times.built else ""
    return f"{timed}{times.sampled} measured alone, the rest from their family's{scaled}"


def full_build_lines(name: str, times: VariantTimes, how: str) -> list[str]:
    """A paragraph on a kernel built fully here, against what its samples estimated."""
    total = times.built_total
    text = (
        f"{name} was built fully here ({how}): its {times.built} objects took "
        f"{long_duration(total)} in all, one object to a core; its {times.sampled} samples "
        f"had estimated {long_duration(times.estimated_for_built)} for them "
        f"({times.estimated_for_built / total:.2f} x). Its row predicts from the build's "
        "own times."
    )
    wrapped = textwrap.fill(text, width=84, break_long_words=False, break_on_hyphens=False)
    return [*wrapped.splitlines(), ""]


@dataclass(frozen=True)
class Prediction:
    """One huge kernel's variant: its unit times and its wall time per builder count."""

    name: str
    kernel: dict[str, Any]  # its entry in huge-kernel-samples.json
    how: str  # how its full build ran ("": none recorded)
    times: VariantTimes
    configure: float
    walls: dict[int, float]  # builders -> seconds


def predictions(
    recorded: dict[str, Any], builds: dict[str, Any], overhead: float
) -> list[Prediction]:
    """Every sampled kernel's prediction, from its full build's times where one was
    recorded."""
    made = []
    for name, kernel in sorted(recorded["kernels"].items()):
        build = builds.get(name, {"how": "", "objects": {}})
        times = variant_times(kernel, build["objects"])
        configure = float(kernel["configure-cpu-seconds"])
        walls = {b: predicted(times.seconds, b, overhead, configure) for b in BUILDERS}
        made.append(Prediction(name, kernel, build["how"], times, configure, walls))
    return made


def huge_kernel_section(
    recorded: dict[str, Any], predicted_kernels: list[Prediction], overhead: float
) -> str:
    """docs/conformance.md's part on the huge kernels: the measured units, the full
    builds and the predicted wall time of one variant."""
    lines = [
        HUGE_BEGIN,
        "## Huge kernels, object by object",
        "",
        "Written by `benchmarks/run --only objects` from the units",
        "`benchmarks/sample_huge.py` measured (benchmarks/data/huge-kernel-samples.json,",
        f"snapshot {recorded['snapshot']}; {recorded['machine']}): each compiled alone as an",
        "object derivation compiles it (`build-variant --step object`), its CPU time and",
        "the peak memory of its largest process; and from the full builds",
        "`benchmarks/record_build.py` recorded (benchmarks/data/huge-kernel-builds.json).",
        "The prediction schedules every unit (its time in a full build, else its",
        f"measured time, else its family's mean) longest first on {SLOTS_PER_BUILDER} slots per",
        "builder of this machine's size, plus the configure step and each derivation's",
        f"own cost ({duration(overhead)}, measured); the link and the checks are not in it.",
        "kernels-community's layer-norm (58 units for 5 archs) was built fully object by",
        "object too (docs/performance.md).",
        "",
    ]
    rows = []
    for one in predicted_kernels:
        times, kernel = one.times, one.kernel
        if times.built:
            lines += full_build_lines(one.name, times, one.how)
        walls = ", ".join(f"{b}: {long_duration(one.walls[b])}" for b in BUILDERS)
        units = "; ".join(
            f"`{Path(s['source']).name}` {s['cpu-seconds']:.0f} s, {s['peak-mib']} MiB"
            for s in kernel["samples"]
        )
        sampled_at = f" (samples at {kernel['archs']})" if times.arch_factor > 1 else ""
        rows.append(
            f"| {one.name} | `{kernel['variant']}`{sampled_at} | {len(times.seconds)} "
            f"({basis(times, kernel)}) "
            f"| {units} | {walls} |"
        )
    return (
        "\n".join(
            [
                *lines,
                "| kernel | variant | objects (unit times) | measured units: CPU time, peak "
                "| predicted wall: builders -> time |",
                "|---|---|---|---|---|",
                *rows,
                HUGE_END,
            ]
        )
        + "\n"
    )


def write_huge_section(section: str, path: Path = TABLE) -> None:
    """The section in docs/conformance.md, in place of the last one (the table above it
    is bench_conformance's, which keeps this part when it rewrites the file)."""
    text = path.read_text()
    before = text.split(HUGE_BEGIN)[0].rstrip("\n")
    path.write_text(f"{before}\n\n{section}")


def huge_kernel_figures(overhead: float) -> list[Figure]:
    if not SAMPLES.exists():
        raise Unavailable(f"no {SAMPLES.name}: run benchmarks/sample_huge.py")
    recorded = json.loads(SAMPLES.read_text())
    builds = json.loads(BUILDS.read_text()) if BUILDS.exists() else {}
    predicted_kernels = predictions(recorded, builds, overhead)
    write_huge_section(huge_kernel_section(recorded, predicted_kernels, overhead))
    figures = []
    for one in predicted_kernels:
        spread = ", ".join(f"{b}: {duration(one.walls[b])}" for b in BUILDERS)
        peak = max(s["peak-mib"] for s in one.kernel["samples"])
        target = one.name == "flash-attn3"
        figures.append(
            Figure(
                name=f"{one.name} ({one.kernel['variant']}, {len(one.times.seconds)} objects), "
                "predicted on 16 builders of this machine's size",
                seconds=one.walls[16],
                baseline="on 1 builder",
                baseline_seconds=one.walls[1],
                target=0.1 if target else None,
                target_text="at least 10 x faster" if target else "",
                detail=f"builders -> wall: {spread}; unit times: {basis(one.times, one.kernel)}; "
                f"{SLOTS_PER_BUILDER} objects at a time per builder (largest peak {peak} "
                f"MiB); configure {duration(one.configure)} and {duration(overhead)} per "
                "derivation included, the link and the checks not",
            )
        )
    return figures


def measure(runs: int = 1) -> list[Figure]:
    if shutil.which("nix") is None:
        raise Unavailable("needs Nix (scripts/setup.sh installs it)")
    with tempfile.TemporaryDirectory(prefix="bench-objects-") as tmp:
        work = Path(tmp)
        made = projects(work)
        variants = {key: CUDA if key.startswith("fused") else CPU for key in made}
        # Warm-up: the toolchain and both build sets' wheels.
        made["fused-one-step"].nix("build", f".#{CUDA}", "--no-link", *SANDBOX)
        made["many-objects"].nix("build", f".#{CPU}.configured", "--no-link", *SANDBOX)
        cold: dict[str, list[float]] = {key: [] for key in made}
        for _ in range(runs):
            for key, project in made.items():
                options = BY_OBJECT if key.endswith("objects") else ONE_STEP
                cold[key].append(project.cold_build(variants[key], options))
        many = made["many-objects"]
        source = many.path / "parts" / "part00.cpp"
        source.write_text(source.read_text() + "// edited\n")
        git(many.path, "add", "-A")
        edit = timed(lambda: many.nix("build", f".#{CPU}", "--no-link", *SANDBOX, *BY_OBJECT))
        link = timed(lambda: many.nix("build", f".#{CPU}", "--no-link", "--rebuild", *SANDBOX))
        here, remote = per_derivation(made["fused-objects"], work / "kernelnix", work)
    best = {key: min(times) for key, times in cold.items()}
    units = GENERATED_SOURCES + 1
    edit_target = 2 / units + link / best["many-objects"]
    remote_text = f", {duration(remote)} through a builder on 127.0.0.1" if remote else ""
    return [
        *(
            Figure(
                name=f"cold build of {what}, object by object",
                seconds=best[f"{key}-objects"],
                baseline="one derivation",
                baseline_seconds=best[f"{key}-one-step"],
                target=target,
                target_text=f"at most {target:.2f} x",
                detail=f"best of {runs}; two cores in all, hermetic, sandbox",
            )
            for key, what, target in (
                ("fused", f"fused-scale's {CUDA} (3 objects)", 1.10),
                ("many", f"a generated {CPU} of {GENERATED_SOURCES} sources and relu's", 1.05),
            )
        ),
        Figure(
            name="rebuild after a one-source edit, object by object",
            seconds=edit,
            baseline="its cold build",
            baseline_seconds=best["many-objects"],
            target=edit_target,
            target_text=f"at most 2/{units} + the link's share ({duration(link)})",
            detail="one object and the variant step",
        ),
        Figure(
            name="a derivation's own cost (20 that do nothing)",
            seconds=here,
            baseline="the cold object build of fused-scale",
            baseline_seconds=best["fused-objects"],
            target=None,
            target_text="",
            detail=f"{duration(here)} per derivation here{remote_text}",
        ),
        *huge_kernel_figures(remote if remote is not None else here),
    ]


if __name__ == "__main__":
    runs_main(measure, 1)
