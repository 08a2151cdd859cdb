"""CUDA capabilities as nvcc flags: what the planner resolves and what a development
build (`--cuda-archs`) narrows, without the config models or the matrix."""

from __future__ import annotations

from kernelnix.config.types import parse_capability


def cuda_gencode(archs: list[str]) -> list[str]:
    """nvcc flags for capabilities: one `-gencode` per arch, `+PTX` adds the PTX."""
    flags = []
    for capability in archs:
        version, suffix, ptx = parse_capability(capability)
        number = f"{version.major}{version.minor}{suffix}"
        flags.append(f"-gencode=arch=compute_{number},code=sm_{number}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{number},code=compute_{number}")
    return flags


def capability_base(capability: str) -> str:
    """`9.0a+PTX` -> `9.0`: the arch without suffix or PTX; ValueError when invalid."""
    version, _, _ = parse_capability(capability)
    return version.major_minor()
