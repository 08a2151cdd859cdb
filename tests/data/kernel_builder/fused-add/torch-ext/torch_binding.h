#pragma once

#include <torch/torch.h>

// out = a + alpha * b, elementwise (contiguous CPU tensors of one shape).
void fused_add(torch::Tensor &out, torch::Tensor const &a,
               torch::Tensor const &b, double alpha);
