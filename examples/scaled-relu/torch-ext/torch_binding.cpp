#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("scale(Tensor! out, Tensor input, float factor) -> ()");
  ops.impl("scale", torch::kCPU, &scale);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
