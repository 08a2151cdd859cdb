// CUDA relu; also built for ROCm ([kernel.relu_rocm]) after hipify.
//
// Includes only the ATen/c10 headers it needs (not <torch/all.h>): nvcc
// compiles this file several times faster. at::Tensor is torch::Tensor.
#include <ATen/Dispatch.h>
#include <ATen/OpMathType.h>
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <algorithm>
#include <cstdint>

namespace {

template <typename scalar_t>
__global__ void relu_kernel(scalar_t *__restrict__ out,
                            scalar_t const *__restrict__ in, int64_t n) {
  // Compare in the op-math type (float for half/bfloat16): c10::Half has no
  // unambiguous operator< in device code.
  using opmath_t = at::opmath_type<scalar_t>;
  int64_t const stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    scalar_t const x = in[i];
    // `x < 0 ? 0 : x` keeps NaN and -0.0 exactly like torch.relu.
    out[i] = static_cast<opmath_t>(x) < opmath_t(0) ? scalar_t(0) : x;
  }
}

} // namespace

void relu(at::Tensor &out, at::Tensor const &input) {
  TORCH_CHECK(input.device().is_cuda(), "relu: input must be a CUDA tensor");
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

  c10::cuda::CUDAGuard const device_guard(input.device());
  // c10's stream API: the same stream as at::cuda::getCurrentCUDAStream(),
  // without ATen/cuda/CUDAContext.h (which needs the cuBLAS/cuSPARSE headers).
  cudaStream_t const stream = c10::cuda::getCurrentCUDAStream();

  constexpr int threads = 256;
  int64_t const blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);

  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, input.scalar_type(),
      "relu_cuda", [&] {
        relu_kernel<scalar_t><<<static_cast<unsigned int>(blocks), threads, 0,
                                stream>>>(out.data_ptr<scalar_t>(),
                                          input.data_ptr<scalar_t>(), n);
      });
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
