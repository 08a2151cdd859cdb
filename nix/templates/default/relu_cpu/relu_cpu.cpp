#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/all.h>

void relu(torch::Tensor &out, torch::Tensor const &input) {
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(),
              "relu: tensors must be on the CPU");
  TORCH_CHECK(input.scalar_type() == out.scalar_type(),
              "relu: input and out must have the same dtype");
  TORCH_CHECK(input.sizes() == out.sizes(),
              "relu: input and out must have the same shape");
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(),
              "relu: tensors must be contiguous");
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, input.scalar_type(),
      "relu_cpu", [&] {
        scalar_t *o = out.data_ptr<scalar_t>();
        scalar_t const *in = input.data_ptr<scalar_t>();
        at::parallel_for(0, input.numel(), 32768, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            o[i] = static_cast<float>(in[i]) < 0.0f ? scalar_t(0) : in[i];
          }
        });
      });
}
