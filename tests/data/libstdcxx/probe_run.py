"""Load the probe library (probe.cpp) into a Python process with Torch, as a
kernel is loaded, and record what each of its operations does.

Usage: python probe_run.py LIBRARY RECORD LOADING

RECORD gets JSON: {"steps": {step: {"value": ...} or {"raised": type,
"message": first line}}, "running": the step under way, or null once all
ran}. It is rewritten before and after every step, so a step that kills the
process is named there. The kernel's std::cout line goes to stdout.

LOADING:
  local             torch.ops.load_library (RTLD_LOCAL), as kernels are loaded
  global-libstdcxx  libstdc++.so.6 is in the global scope first, as in a
                    C++ program embedding Python or after any RTLD_GLOBAL load
  torch-threw-first Torch throws and catches one C++ exception before the
                    library is loaded (libgcc_s's unwinder has run once)
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import sys
from collections.abc import Callable
from typing import Any

import torch

library, record, loading = sys.argv[1:4]
steps: dict[str, Any] = {}


def save(running: str | None) -> None:
    with open(record, "w", encoding="utf-8") as out:
        json.dump({"steps": steps, "running": running}, out, indent=1)


def observe(name: str, step: Callable[[], Any]) -> None:
    """The step's value, or the exception Python sees (type, first line)."""
    save(running=name)
    try:
        steps[name] = {"value": step()}
    except Exception as error:
        lines = str(error).splitlines()
        steps[name] = {"raised": type(error).__name__, "message": lines[0] if lines else ""}
    save(running=None)


def torch_formats_a_number() -> str:
    """Torch's own error message, formatted by Torch's libstdc++ (c10::str)."""
    torch.empty(6).view(1234567)
    return "no error"


if loading == "global-libstdcxx":
    ctypes.CDLL("libstdc++.so.6", mode=ctypes.RTLD_GLOBAL)
if loading == "torch-threw-first":
    with contextlib.suppress(RuntimeError):
        torch.empty(6).view(7)
torch.ops.load_library(library)
probe = torch.ops.libstdcxx_probe

observe("bindings", probe.bindings)
observe("regex", lambda: probe.regex_groups(r"(\w+)@(\w+)\.org", "mail kernel@hub.org now"))
observe("format_int", lambda: probe.format_int(1234567))
observe("format_grouped", lambda: probe.format_grouped(1234567))
observe("write_cout", lambda: probe.write_cout("probe: written to std::cout"))
observe("catch_own", probe.catch_own)
observe("uncaught_at_start", probe.uncaught_exceptions)
observe("throw_runtime", lambda: probe.throw_runtime("thrown by the kernel"))
observe("uncaught_after_throw", probe.uncaught_exceptions)
observe("torch_check", lambda: probe.torch_check("checked by the kernel"))
observe("catch_torch", probe.catch_torch)
observe("uncaught_after_catch", probe.uncaught_exceptions)
observe("device_name", lambda: probe.device_name("cpu"))
observe("set_global_grouping", probe.set_global_grouping)
observe("format_int_after", lambda: probe.format_int(1234567))
observe("torch_formats_after", torch_formats_a_number)
observe("regex_after", lambda: probe.regex_groups(r"id (\d+)", "id 42"))
