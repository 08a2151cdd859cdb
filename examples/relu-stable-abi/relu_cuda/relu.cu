// CUDA relu written against the Torch stable ABI only; also built for ROCm
// ([kernel.relu_rocm], full ABI there) after hipify.
#include <cuda_runtime.h>

#include <torch/csrc/inductor/aoti_torch/c/shim.h>
#include <torch/csrc/stable/accelerator.h>
#include <torch/csrc/stable/macros.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

namespace {

using torch::headeronly::ScalarType;

// Compare half/bfloat16 in float; float and double as themselves.
template <typename T>
using opmath_t =
    std::conditional_t<std::is_same_v<T, torch::headeronly::Half> ||
                           std::is_same_v<T, torch::headeronly::BFloat16>,
                       float, T>;

template <typename scalar_t>
__global__ void relu_kernel(scalar_t *__restrict__ out,
                            scalar_t const *__restrict__ in, int64_t n) {
  int64_t const stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    scalar_t const x = in[i];
    // `x < 0 ? 0 : x` keeps NaN and -0.0 exactly like torch.relu.
    out[i] = static_cast<opmath_t<scalar_t>>(x) < opmath_t<scalar_t>(0)
                 ? scalar_t(0)
                 : x;
  }
}

template <typename scalar_t>
void launch(torch::stable::Tensor &out, torch::stable::Tensor const &input,
            cudaStream_t stream) {
  int64_t const n = input.numel();
  constexpr int threads = 256;
  int64_t const blocks = std::min<int64_t>((n + threads - 1) / threads, 65535);
  relu_kernel<scalar_t><<<static_cast<unsigned int>(blocks), threads, 0, stream>>>(
      out.mutable_data_ptr<scalar_t>(), input.const_data_ptr<scalar_t>(), n);
  STD_CUDA_KERNEL_LAUNCH_CHECK();
}

} // namespace

void relu(torch::stable::Tensor &out, torch::stable::Tensor const &input) {
  STD_TORCH_CHECK(input.is_cuda(), "relu: input must be a CUDA tensor");
  STD_TORCH_CHECK(out.is_cuda() &&
                      out.get_device_index() == input.get_device_index(),
                  "relu: input and out must be on the same device");
  STD_TORCH_CHECK(input.scalar_type() == out.scalar_type(),
                  "relu: input and out must have the same dtype, got ",
                  torch::headeronly::toString(input.scalar_type()), " and ",
                  torch::headeronly::toString(out.scalar_type()));
  STD_TORCH_CHECK(input.sizes() == out.sizes(),
                  "relu: input and out must have the same shape");
  STD_TORCH_CHECK(input.is_contiguous(), "relu: input must be contiguous");
  STD_TORCH_CHECK(out.is_contiguous(), "relu: out must be contiguous");
  if (input.numel() == 0) {
    return;
  }

  torch::stable::accelerator::DeviceGuard const guard(input.get_device_index());
  void *stream_ptr = nullptr;
  STABLE_TORCH_ERROR_CODE_CHECK(
      aoti_torch_get_current_cuda_stream(input.get_device_index(), &stream_ptr));
  cudaStream_t const stream = static_cast<cudaStream_t>(stream_ptr);

  THO_DISPATCH_SWITCH(
      input.scalar_type(), "relu_cuda",
      THO_DISPATCH_CASE(ScalarType::Float, [&] { launch<scalar_t>(out, input, stream); })
      THO_DISPATCH_CASE(ScalarType::Double, [&] { launch<scalar_t>(out, input, stream); })
      THO_DISPATCH_CASE(ScalarType::Half, [&] { launch<scalar_t>(out, input, stream); })
      THO_DISPATCH_CASE(ScalarType::BFloat16, [&] { launch<scalar_t>(out, input, stream); }));
}
