// The CPU fallback of fused-scale: the same ops, with ATen's CPU loops.
#include <ATen/Dispatch.h>
#include <ATen/Parallel.h>
#include <torch/torch.h>

void scale_add(torch::Tensor &out, torch::Tensor const &x, torch::Tensor const &y,
               double alpha) {
  for (torch::Tensor const *t : {&x, &y, const_cast<torch::Tensor const *>(&out)}) {
    TORCH_CHECK(t->device().is_cpu(), "fused_scale: tensors must be on the CPU");
    TORCH_CHECK(t->is_contiguous(), "fused_scale: tensors must be contiguous");
    TORCH_CHECK(t->sizes() == out.sizes() && t->scalar_type() == out.scalar_type(),
                "fused_scale: x, y and out must have one shape and dtype");
  }
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(), "scale_add", [&] {
        auto *o = out.data_ptr<scalar_t>();
        auto const *a = x.data_ptr<scalar_t>();
        auto const *b = y.data_ptr<scalar_t>();
        float const scale = static_cast<float>(alpha);
        at::parallel_for(0, out.numel(), 4096, [&](int64_t begin, int64_t end) {
          for (int64_t i = begin; i < end; ++i) {
            o[i] = static_cast<scalar_t>(scale * static_cast<float>(a[i]) +
                                         static_cast<float>(b[i]));
          }
        });
      });
}

torch::Tensor sum_squares(torch::Tensor const &x) {
  TORCH_CHECK(x.device().is_cpu() && x.is_contiguous(),
              "fused_scale: x must be a contiguous CPU tensor");
  return x.to(torch::kFloat).square().sum().reshape({1}).to(x.scalar_type());
}
