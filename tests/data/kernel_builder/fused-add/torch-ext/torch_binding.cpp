#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("fused_add(Tensor! out, Tensor a, Tensor b, float alpha) -> ()");
  ops.impl("fused_add", torch::kCPU, &fused_add);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
