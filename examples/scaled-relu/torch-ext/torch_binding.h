#pragma once

#include <torch/torch.h>

// out = input * factor, elementwise. `out` and `input` must be contiguous CPU
// tensors of the same shape and floating dtype.
void scale(torch::Tensor &out, torch::Tensor const &input, double factor);
