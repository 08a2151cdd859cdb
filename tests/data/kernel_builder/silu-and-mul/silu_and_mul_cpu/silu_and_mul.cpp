#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/all.h>

#include <cmath>

void silu_and_mul(torch::Tensor &out, torch::Tensor const &x) {
  TORCH_CHECK(x.device().is_cpu() && out.device().is_cpu(),
              "silu_and_mul: tensors must be on the CPU");
  TORCH_CHECK(x.dim() == 2 && x.size(1) % 2 == 0,
              "silu_and_mul: x must be a matrix with an even number of columns");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous(),
              "silu_and_mul: tensors must be contiguous");
  int64_t const rows = x.size(0), d = x.size(1) / 2;
  TORCH_CHECK(out.size(0) == rows && out.size(1) == d, "silu_and_mul: out has the wrong shape");
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
      "silu_and_mul_cpu", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        scalar_t const *in = x.data_ptr<scalar_t>();
        scalar_t *o = out.data_ptr<scalar_t>();
        at::parallel_for(0, rows, 64, [&](int64_t begin, int64_t end) {
          for (int64_t r = begin; r < end; ++r) {
            for (int64_t c = 0; c < d; ++c) {
              opmath_t const g = static_cast<opmath_t>(in[r * 2 * d + c]);
              opmath_t const u = static_cast<opmath_t>(in[r * 2 * d + d + c]);
              o[r * d + c] = static_cast<scalar_t>(g / (opmath_t(1) + std::exp(-g)) * u);
            }
          }
        });
      });
}
