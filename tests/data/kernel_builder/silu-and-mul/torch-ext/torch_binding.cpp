#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("silu_and_mul(Tensor! out, Tensor x) -> ()");
#if defined(CPU_KERNEL)
  ops.impl("silu_and_mul", torch::kCPU, &silu_and_mul);
#elif defined(CUDA_KERNEL)
  ops.impl("silu_and_mul", torch::kCUDA, &silu_and_mul);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
