#include <ATen/cuda/CUDAContext.h>
#include <torch/all.h>

template <typename scalar_t>
__global__ void silu_and_mul_kernel(scalar_t *__restrict__ out,
                                    scalar_t const *__restrict__ x, int64_t d) {
  int64_t const row = blockIdx.x;
  for (int64_t c = threadIdx.x; c < d; c += blockDim.x) {
    float const g = static_cast<float>(x[row * 2 * d + c]);
    float const u = static_cast<float>(x[row * 2 * d + d + c]);
    out[row * d + c] = static_cast<scalar_t>(g / (1.0f + expf(-g)) * u);
  }
}

void silu_and_mul(torch::Tensor &out, torch::Tensor const &x) {
  TORCH_CHECK(x.is_cuda() && out.is_cuda(), "silu_and_mul: tensors must be on the GPU");
  TORCH_CHECK(x.dim() == 2 && x.size(1) % 2 == 0,
              "silu_and_mul: x must be a matrix with an even number of columns");
  int64_t const rows = x.size(0), d = x.size(1) / 2;
  AT_DISPATCH_FLOATING_TYPES_AND2(
      at::ScalarType::Half, at::ScalarType::BFloat16, x.scalar_type(),
      "silu_and_mul_cuda", [&] {
        silu_and_mul_kernel<scalar_t>
            <<<rows, 256, 0, at::cuda::getCurrentCUDAStream()>>>(
                out.data_ptr<scalar_t>(), x.data_ptr<scalar_t>(), d);
      });
}
