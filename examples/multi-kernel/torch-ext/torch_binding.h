#pragma once

#include <string>

#include <torch/torch.h>

// silu(x) = x * sigmoid(x) on contiguous float32 CPU tensors. Runs the AVX2
// kernel when the CPU supports AVX2 and FMA, the portable one otherwise.
void silu(torch::Tensor &out, torch::Tensor const &input);

// The portable kernel, whatever the CPU (for tests and comparisons).
void silu_portable(torch::Tensor &out, torch::Tensor const &input);

// "avx2" or "portable": the kernel `silu` runs on this machine.
std::string silu_variant();

// out = input * factor (kernel in scale/scale.cpp).
void scale(torch::Tensor &out, torch::Tensor const &input, double factor);
