#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/all.h>

namespace {

template <typename scalar_t>
void relu_cpu_impl(scalar_t *__restrict__ out, scalar_t const *__restrict__ in,
                   int64_t n) {
  // Compare in the op-math type (float for half/bfloat16, exact for double).
  // `x < 0 ? 0 : x` keeps NaN and -0.0 exactly like torch.relu.
  using opmath_t = at::opmath_type<scalar_t>;
  at::parallel_for(0, n, /*grain_size=*/32768, [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      scalar_t const x = in[i];
      out[i] = static_cast<opmath_t>(x) < opmath_t(0) ? scalar_t(0) : x;
    }
  });
}

} // namespace

void relu(torch::Tensor &out, torch::Tensor const &input) {
  TORCH_CHECK(input.device().is_cpu(), "relu: input must be a CPU tensor");
  TORCH_CHECK(out.device().is_cpu(), "relu: out must be a CPU tensor");
  TORCH_CHECK(input.scalar_type() == out.scalar_type(),
              "relu: input and out must have the same dtype, got ",
              input.scalar_type(), " and ", out.scalar_type());
  TORCH_CHECK(input.sizes() == out.sizes(),
              "relu: input and out must have the same shape, got ",
              input.sizes(), " and ", out.sizes());
  TORCH_CHECK(input.is_contiguous(), "relu: input must be contiguous");
  TORCH_CHECK(out.is_contiguous(), "relu: out must be contiguous");

  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, input.scalar_type(),
      "relu_cpu", [&] {
        relu_cpu_impl<scalar_t>(out.data_ptr<scalar_t>(),
                                input.data_ptr<scalar_t>(), input.numel());
      });
}
