"""relu through TVM FFI: on any array that DLPack gives (a numpy array, a torch tensor)."""

from typing import Any

import tvm_ffi

from ._ops import ops


def relu(x: Any, out: Any) -> Any:
    """out = relu(x), elementwise; `x` and `out`: contiguous float32 arrays of the
    same size on the device the variant is built for (the CPU, a CUDA GPU). Returns `out`."""
    x_t = tvm_ffi.from_dlpack(x)
    out_t = tvm_ffi.from_dlpack(out)
    function = getattr(ops, f"relu_{x_t.device.type}", None)
    if function is None:
        raise NotImplementedError(f"relu: this variant has no kernel for {x_t.device.type!r}")
    function(out_t, x_t)
    return out


__all__ = ["relu"]
