// Device kernels of fused-scale and their launchers; dispatch.cu checks the
// tensors and picks the dtype, kernels.cu holds the code.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#ifndef FUSED_SCALE_THREADS
#define FUSED_SCALE_THREADS 256
#endif

namespace fused_scale {

// out[i] = alpha * x[i] + y[i]
template <typename scalar_t>
void launch_scale_add(scalar_t *out, scalar_t const *x, scalar_t const *y, float alpha,
                      int64_t n, cudaStream_t stream);

// *result = sum of x[i]^2, accumulated in float (result must start at zero).
template <typename scalar_t>
void launch_sum_squares(float *result, scalar_t const *x, int64_t n, cudaStream_t stream);

} // namespace fused_scale
