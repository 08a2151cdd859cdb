#include "activation.h"

#include <cmath>

namespace multi_kernel {

void silu_portable(float *out, float const *in, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    float const x = in[i];
    out[i] = x / (1.0f + std::exp(-x));
  }
}

} // namespace multi_kernel
