"""Record a huge kernel's full object-by-object build (`kernelnix build`, one or
several resumed runs) from the progress lines it printed, one per finished
object (`[12/61] flash_attn/src/flash_fwd_hdim128_bf16_sm80.cu (8.0 9.0) 74 s`):
each object's seconds, from its derivation's start to its end, as built for the
variant's archs. Writes benchmarks/data/huge-kernel-builds.json, which
bench_objects.py predicts from in place of the samples' estimates.

    python benchmarks/record_build.py flash-attn2 LOG... --how "2 cores, ..." \
        [--retimed SOURCE=SECONDS]
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Iterable
from pathlib import Path

BUILDS = Path(__file__).resolve().parent / "data" / "huge-kernel-builds.json"
# kernelnix.project.objects' progress line: count, source, label, seconds, builder.
PROGRESS = re.compile(r"^\[\d+/\d+\] (?P<source>\S+) \(.*\) (?P<seconds>\d+) s( on \S+)?$")


def object_seconds(lines: Iterable[str]) -> dict[str, float]:
    """Each finished object's seconds; a later run's line for the same source
    wins (the object was built again, after a garbage collection)."""
    seconds: dict[str, float] = {}
    for line in lines:
        found = PROGRESS.match(line.rstrip("\n"))
        if found:
            seconds[found["source"]] = float(found["seconds"])
    return dict(sorted(seconds.items()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel")
    parser.add_argument("logs", nargs="+", type=Path)
    parser.add_argument("--how", required=True, help="the machine and the build's settings")
    parser.add_argument(
        "--retimed",
        action="append",
        default=[],
        metavar="SOURCE=SECONDS",
        help="an object timed again apart (`nix build --rebuild` of its derivation), in "
        "place of its line: one whose build was paused, for instance",
    )
    args = parser.parse_args()
    lines = [line for log in args.logs for line in log.read_text().splitlines()]
    objects = object_seconds(lines)
    for retimed in args.retimed:
        source, _, seconds = retimed.partition("=")
        if source not in objects:
            parser.error(f"--retimed {retimed}: no object {source} in the logs")
        if not re.fullmatch(r"\d+(\.\d+)?", seconds):
            parser.error(f"--retimed {retimed}: SECONDS must be a number of seconds")
        objects[source] = float(seconds)
    recorded = json.loads(BUILDS.read_text()) if BUILDS.exists() else {}
    recorded[args.kernel] = {"how": args.how, "objects": objects}
    BUILDS.write_text(json.dumps(recorded, indent=1) + "\n")


if __name__ == "__main__":
    main()
