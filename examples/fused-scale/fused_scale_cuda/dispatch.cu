// The ops' CUDA entry points: check the tensors, set the device, take ATen's
// current stream, pick the dtype and launch (kernels.cu).
#include <ATen/Dispatch.h>
#include <ATen/cuda/CUDAContext.h>
#include <ATen/ops/zeros.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels.cuh"

namespace {

void check_operand(at::Tensor const &t, at::Tensor const &like, char const *name) {
  TORCH_CHECK(t.is_cuda(), "fused_scale: ", name, " must be a CUDA tensor");
  TORCH_CHECK(t.device() == like.device(), "fused_scale: ", name, " is on ", t.device(),
              ", expected ", like.device());
  TORCH_CHECK(t.scalar_type() == like.scalar_type(), "fused_scale: ", name, " has dtype ",
              t.scalar_type(), ", expected ", like.scalar_type());
  TORCH_CHECK(t.sizes() == like.sizes(), "fused_scale: ", name, " has shape ", t.sizes(),
              ", expected ", like.sizes());
  TORCH_CHECK(t.is_contiguous(), "fused_scale: ", name, " must be contiguous");
}

} // namespace

void scale_add(at::Tensor &out, at::Tensor const &x, at::Tensor const &y, double alpha) {
  check_operand(x, out, "x");
  check_operand(y, out, "y");
  check_operand(out, out, "out");
  if (out.numel() == 0) {
    return;
  }
  at::cuda::CUDAGuard const device_guard(out.device());
  cudaStream_t const stream = at::cuda::getCurrentCUDAStream();
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, out.scalar_type(), "scale_add", [&] {
        fused_scale::launch_scale_add<scalar_t>(
            out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), y.data_ptr<scalar_t>(),
            static_cast<float>(alpha), out.numel(), stream);
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

at::Tensor sum_squares(at::Tensor const &x) {
  check_operand(x, x, "x");
  at::cuda::CUDAGuard const device_guard(x.device());
  at::Tensor result = at::zeros({1}, x.options().dtype(at::kFloat));
  if (x.numel() > 0) {
    cudaStream_t const stream = at::cuda::getCurrentCUDAStream();
    AT_DISPATCH_FLOATING_TYPES_AND2(
        at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(), "sum_squares", [&] {
          fused_scale::launch_sum_squares<scalar_t>(result.data_ptr<float>(),
                                                    x.data_ptr<scalar_t>(), x.numel(), stream);
        });
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  return result.to(x.scalar_type());
}
