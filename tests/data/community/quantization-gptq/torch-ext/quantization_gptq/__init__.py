from .custom_ops import gemm_int4_forward

__all__ = ["gemm_int4_forward"]