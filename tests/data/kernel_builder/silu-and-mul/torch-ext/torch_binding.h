#pragma once

#include <torch/torch.h>

// out = silu(x[..., :d]) * x[..., d:], where x has 2 * d columns.
void silu_and_mul(torch::Tensor &out, torch::Tensor const &x);
