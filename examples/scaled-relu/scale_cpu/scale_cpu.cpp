#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/all.h>

void scale(torch::Tensor &out, torch::Tensor const &input, double factor) {
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(),
              "scale: input and out must be CPU tensors");
  TORCH_CHECK(input.scalar_type() == out.scalar_type(),
              "scale: input and out must have the same dtype");
  TORCH_CHECK(input.sizes() == out.sizes(),
              "scale: input and out must have the same shape");
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(),
              "scale: input and out must be contiguous");

  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, input.scalar_type(),
      "scale_cpu", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        auto const f = static_cast<opmath_t>(factor);
        scalar_t *o = out.data_ptr<scalar_t>();
        scalar_t const *in = input.data_ptr<scalar_t>();
        at::parallel_for(0, input.numel(), 32768, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            o[i] = static_cast<scalar_t>(static_cast<opmath_t>(in[i]) * f);
          }
        });
      });
}
