#pragma once

#include <torch/torch.h>

// out = max(input, 0), elementwise. `out` and `input` must be contiguous,
// have the same shape and dtype, and live on the device of the backend
// this variant was built for.
void relu(torch::Tensor &out, torch::Tensor const &input);
