#include "kernels.cuh"

#include <c10/util/BFloat16.h>
#include <c10/util/Half.h>

#include <algorithm>

namespace fused_scale {
namespace {

int grid_for(int64_t n) {
  return static_cast<int>(
      std::min<int64_t>((n + FUSED_SCALE_THREADS - 1) / FUSED_SCALE_THREADS, 4096));
}

template <typename scalar_t>
__global__ void scale_add_kernel(scalar_t *__restrict__ out, scalar_t const *__restrict__ x,
                                 scalar_t const *__restrict__ y, float alpha, int64_t n) {
  int64_t const stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    out[i] = static_cast<scalar_t>(alpha * static_cast<float>(x[i]) + static_cast<float>(y[i]));
  }
}

template <typename scalar_t>
__global__ void sum_squares_kernel(float *__restrict__ result, scalar_t const *__restrict__ x,
                                   int64_t n) {
  __shared__ float partial[FUSED_SCALE_THREADS];
  float sum = 0.0f;
  int64_t const stride = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += stride) {
    float const value = static_cast<float>(x[i]);
    sum += value * value;
  }
  partial[threadIdx.x] = sum;
  __syncthreads();
  for (unsigned int half = blockDim.x / 2; half > 0; half /= 2) {
    if (threadIdx.x < half) {
      partial[threadIdx.x] += partial[threadIdx.x + half];
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) {
    atomicAdd(result, partial[0]);
  }
}

} // namespace

template <typename scalar_t>
void launch_scale_add(scalar_t *out, scalar_t const *x, scalar_t const *y, float alpha,
                      int64_t n, cudaStream_t stream) {
  scale_add_kernel<scalar_t><<<grid_for(n), FUSED_SCALE_THREADS, 0, stream>>>(out, x, y, alpha, n);
}

template <typename scalar_t>
void launch_sum_squares(float *result, scalar_t const *x, int64_t n, cudaStream_t stream) {
  sum_squares_kernel<scalar_t><<<grid_for(n), FUSED_SCALE_THREADS, 0, stream>>>(result, x, n);
}

#define FUSED_SCALE_INSTANTIATE(T)                                                          \
  template void launch_scale_add<T>(T *, T const *, T const *, float, int64_t, cudaStream_t); \
  template void launch_sum_squares<T>(float *, T const *, int64_t, cudaStream_t);

FUSED_SCALE_INSTANTIATE(float)
FUSED_SCALE_INSTANTIATE(double)
FUSED_SCALE_INSTANTIATE(c10::Half)
FUSED_SCALE_INSTANTIATE(c10::BFloat16)

} // namespace fused_scale
