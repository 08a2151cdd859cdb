#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cstdint>

namespace {

__global__ void relu_kernel(float *__restrict__ out,
                            float const *__restrict__ in, int64_t n) {
  int64_t const i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    out[i] = in[i] < 0.0f ? 0.0f : in[i]; // keeps NaN and -0.0 like torch.relu
  }
}

} // namespace

// float32 only, kept minimal.
void relu(at::Tensor &out, at::Tensor const &input) {
  TORCH_CHECK(input.is_cuda() && out.device() == input.device(),
              "relu: input and out must be on the same CUDA device");
  TORCH_CHECK(input.scalar_type() == at::kFloat &&
                  out.scalar_type() == at::kFloat,
              "relu: only float32 is supported");
  TORCH_CHECK(input.sizes() == out.sizes(),
              "relu: input and out must have the same shape");
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(),
              "relu: input and out must be contiguous");

  int64_t const n = input.numel();
  if (n == 0) {
    return;
  }
  c10::cuda::CUDAGuard const device_guard(input.device());
  constexpr int threads = 256;
  int64_t const blocks = (n + threads - 1) / threads;
  TORCH_CHECK(blocks <= 0x7fffffff, "relu: tensor too large");
  relu_kernel<<<static_cast<unsigned int>(blocks), threads, 0,
                c10::cuda::getCurrentCUDAStream()>>>(
      out.data_ptr<float>(), input.data_ptr<float>(), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
