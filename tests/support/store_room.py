"""Room in the Nix store for a whole test run (`pytest --nix-gc-below GB`).

The end-to-end tests fetch and unpack Torch and CUDA wheels by the gigabyte,
more in all than a CI machine's disk holds. With the option, after each test
module the run collects the store's garbage whenever less than that much is
free: what a later test still uses is a GC root (a `result` link in its
temporary directory) or is fetched and built again. Without it nothing is
collected. Either way the run's summary says how low free space went.
"""

from __future__ import annotations

import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

STORE = Path("/nix/store")
GB = 1e9


def free_bytes() -> int | None:
    """Free space on the store's file system, or None without a store."""
    if not STORE.is_dir():
        return None
    return shutil.disk_usage(STORE).free


@dataclass
class StoreRoom:
    """What the run saw of the store's free space, and what it collected."""

    gc_below: float | None
    lowest: tuple[int, str] | None = None
    collections: list[tuple[str, int, int]] = field(default_factory=list)

    def after_module(self, module: str) -> None:
        free = free_bytes()
        if free is None:
            return
        if self.lowest is None or free < self.lowest[0]:
            self.lowest = (free, module)
        if self.gc_below is not None and free < self.gc_below * GB:
            subprocess.run(["nix-store", "--gc"], check=True, capture_output=True)
            self.collections.append((module, free, free_bytes() or 0))

    def summary(self) -> list[str]:
        if self.lowest is None:
            return []
        free, module = self.lowest
        lines = [f"Nix store: {free / GB:.1f} GB free at the lowest, after {module}"]
        lines += [
            f"Nix store: collected garbage after {module}: {before / GB:.1f} -> "
            f"{after / GB:.1f} GB free"
            for module, before, after in self.collections
        ]
        return lines
