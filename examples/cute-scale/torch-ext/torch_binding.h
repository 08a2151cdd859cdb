#pragma once

#include <torch/torch.h>

// out = alpha * x for contiguous float32 CUDA tensors of one shape.
void cute_scale(torch::Tensor &out, torch::Tensor const &x, double alpha);
