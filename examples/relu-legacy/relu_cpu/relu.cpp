#include <torch/all.h>

// float32 only, kept minimal.
void relu(torch::Tensor &out, torch::Tensor const &input) {
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(),
              "relu: input and out must be CPU tensors");
  TORCH_CHECK(input.scalar_type() == torch::kFloat &&
                  out.scalar_type() == torch::kFloat,
              "relu: only float32 is supported");
  TORCH_CHECK(input.sizes() == out.sizes(),
              "relu: input and out must have the same shape");
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(),
              "relu: input and out must be contiguous");

  float const *in = input.data_ptr<float>();
  float *o = out.data_ptr<float>();
  for (int64_t i = 0, n = input.numel(); i < n; ++i) {
    o[i] = in[i] < 0.0f ? 0.0f : in[i]; // keeps NaN and -0.0 like torch.relu
  }
}
