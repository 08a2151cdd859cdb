#pragma once

#include <torch/torch.h>

// out = alpha * x + y, elementwise, on the tensors' device. All three tensors
// must be contiguous, of one shape and dtype, on one device.
void scale_add(torch::Tensor &out, torch::Tensor const &x, torch::Tensor const &y,
               double alpha);

// The sum of squares of x, as a one-element tensor of x's dtype (float32 math).
torch::Tensor sum_squares(torch::Tensor const &x);
