#pragma once

#include <torch/all.h>

// out = max(input, 0), elementwise; both contiguous, same shape and dtype.
void relu(torch::Tensor &out, torch::Tensor const &input);
