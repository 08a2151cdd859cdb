from .triton_a100 import kernel_a100
from .triton_h100 import kernel_h100
from .triton_b200 import kernel_b200
from .trimul_mi300 import kernel_mi300
from .trimul_global import kernel_global

__all__ = ["kernel_a100", "kernel_h100", "kernel_b200", "kernel_mi300", "kernel_global"]