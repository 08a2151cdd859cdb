#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("scale_add(Tensor! out, Tensor x, Tensor y, float alpha) -> ()");
  ops.def("sum_squares(Tensor x) -> Tensor");
#if defined(CPU_KERNEL)
  ops.impl("scale_add", torch::kCPU, &scale_add);
  ops.impl("sum_squares", torch::kCPU, &sum_squares);
#elif defined(CUDA_KERNEL) || defined(ROCM_KERNEL)
  ops.impl("scale_add", torch::kCUDA, &scale_add);
  ops.impl("sum_squares", torch::kCUDA, &sum_squares);
#endif
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
