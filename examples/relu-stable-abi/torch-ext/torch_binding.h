#pragma once

// Torch stable ABI only: no ATen, c10 or torch::Tensor.
#include <torch/csrc/stable/tensor.h>

// out = max(input, 0), elementwise. `out` and `input` must be contiguous and
// have the same shape and dtype.
void relu(torch::stable::Tensor &out, torch::stable::Tensor const &input);
