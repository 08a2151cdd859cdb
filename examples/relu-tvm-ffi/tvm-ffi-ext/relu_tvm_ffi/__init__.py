"""relu through TVM FFI: on any array that DLPack gives (a numpy array, a torch tensor)."""

from typing import Any

import tvm_ffi

from ._ops import ops


def relu(x: Any, out: Any) -> Any:
    """out = relu(x), elementwise; `x` and `out`: contiguous float32 arrays of the
    same size on the CPU. Returns `out`."""
    x_t = tvm_ffi.from_dlpack(x)
    out_t = tvm_ffi.from_dlpack(out)
    if x_t.device.type != "cpu":
        raise NotImplementedError(f"relu: no kernel for device {x_t.device.type!r}")
    ops.relu_cpu(out_t, x_t)
    return out


__all__ = ["relu"]
