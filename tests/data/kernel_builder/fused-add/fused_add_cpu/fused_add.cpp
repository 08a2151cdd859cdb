#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/Parallel.h>
#include <torch/all.h>

void fused_add(torch::Tensor &out, torch::Tensor const &a,
               torch::Tensor const &b, double alpha) {
  auto check = [&](torch::Tensor const &t) {
    TORCH_CHECK(t.device().is_cpu(), "fused_add: tensors must be on the CPU");
    TORCH_CHECK(t.is_contiguous(), "fused_add: tensors must be contiguous");
    TORCH_CHECK(t.sizes() == out.sizes(), "fused_add: shapes differ");
    TORCH_CHECK(t.scalar_type() == out.scalar_type(), "fused_add: dtypes differ");
  };
  check(a);
  check(b);
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(),
      "fused_add_cpu", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        opmath_t const k = static_cast<opmath_t>(alpha);
        scalar_t const *x = a.data_ptr<scalar_t>();
        scalar_t const *y = b.data_ptr<scalar_t>();
        scalar_t *o = out.data_ptr<scalar_t>();
        at::parallel_for(0, out.numel(), 32768, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            o[i] = static_cast<scalar_t>(static_cast<opmath_t>(x[i]) +
                                         k * static_cast<opmath_t>(y[i]));
          }
        });
      });
}
