// SYCL relu for Intel GPUs, enqueued on torch's current XPU stream.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <c10/xpu/XPUStream.h>
#include <sycl/sycl.hpp>
#include <torch/all.h>

#include <cstdint>

void relu(torch::Tensor &out, torch::Tensor const &input) {
  TORCH_CHECK(input.device().is_xpu(), "relu: input must be an XPU tensor");
  TORCH_CHECK(out.device() == input.device(),
              "relu: input and out must be on the same device");
  TORCH_CHECK(input.scalar_type() == out.scalar_type(),
              "relu: input and out must have the same dtype, got ",
              input.scalar_type(), " and ", out.scalar_type());
  TORCH_CHECK(input.sizes() == out.sizes(),
              "relu: input and out must have the same shape, got ",
              input.sizes(), " and ", out.sizes());
  TORCH_CHECK(input.is_contiguous(), "relu: input must be contiguous");
  TORCH_CHECK(out.is_contiguous(), "relu: out must be contiguous");

  int64_t const n = input.numel();
  if (n == 0) {
    return;
  }

  sycl::queue &queue = c10::xpu::getCurrentXPUStream(input.device().index()).queue();

  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, input.scalar_type(),
      "relu_xpu", [&] {
        using opmath_t = at::opmath_type<scalar_t>;
        scalar_t const *in = input.data_ptr<scalar_t>();
        scalar_t *o = out.data_ptr<scalar_t>();
        queue.parallel_for(sycl::range<1>(static_cast<size_t>(n)),
                           [=](sycl::id<1> idx) {
                             size_t const i = idx[0];
                             scalar_t const x = in[i];
                             // Compare in op-math type (float for half and
                             // bfloat16); keeps NaN and -0.0 like torch.relu.
                             o[i] = static_cast<opmath_t>(x) < opmath_t(0)
                                        ? scalar_t(0)
                                        : x;
                           });
      });
}
