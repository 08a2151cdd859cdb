#include <torch/library.h>

#include "registration.h"
#include "torch_binding.h"

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("cute_scale(Tensor! out, Tensor x, float alpha) -> ()");
  ops.impl("cute_scale", torch::kCUDA, &cute_scale);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
