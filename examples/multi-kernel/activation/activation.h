#pragma once

// Raw float32 kernels on contiguous buffers. Deliberately free of torch
// headers: silu_avx2.cpp is compiled with -mavx2 -mfma, and any inline torch
// function instantiated there could be picked by the linker for the whole
// library and then run on a CPU without AVX2.

#include <cstdint>

namespace multi_kernel {

// out[i] = in[i] / (1 + exp(-in[i])). Requires a CPU with AVX2 and FMA.
void silu_avx2(float *out, float const *in, int64_t n);

// Same result with plain C++ (any CPU).
void silu_portable(float *out, float const *in, int64_t n);

} // namespace multi_kernel
