// silu with AVX2 + FMA intrinsics, 8 floats per step. Compiled with the
// cxx-flags of [kernel.activation_avx2] (-mavx2 -mfma); the binding calls it
// only after checking the CPU at run time.
#include "activation.h"

#if defined(__x86_64__) || defined(_M_X64)

#if !defined(__AVX2__) || !defined(__FMA__)
#error "activation/silu_avx2.cpp needs -mavx2 -mfma: the cxx-flags of [kernel.activation_avx2] were not applied"
#endif

#include <immintrin.h>

#include <cmath>

namespace {

// exp(x) for 8 floats: x = n*ln2 + r with |r| <= ln2/2, e^r by a degree-6
// polynomial (Cephes expf coefficients), 2^n built in the exponent bits.
// Inputs are clamped so that 2^n stays a normal float; callers only need
// exp(-x) up to "huge" or "tiny", which the clamp preserves.
inline __m256 exp256(__m256 x) {
  __m256 const hi = _mm256_set1_ps(88.0f);
  __m256 const lo = _mm256_set1_ps(-87.0f);
  __m256 const log2e = _mm256_set1_ps(1.44269504088896341f);
  __m256 const ln2_hi = _mm256_set1_ps(0.693359375f);
  __m256 const ln2_lo = _mm256_set1_ps(-2.12194440e-4f);
  __m256 const one = _mm256_set1_ps(1.0f);

  x = _mm256_max_ps(_mm256_min_ps(x, hi), lo);

  // n = round(x / ln2)
  __m256 const n = _mm256_round_ps(_mm256_mul_ps(x, log2e),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n*ln2, in two steps for accuracy.
  __m256 r = _mm256_fnmadd_ps(n, ln2_hi, x);
  r = _mm256_fnmadd_ps(n, ln2_lo, r);

  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  // e^r = 1 + r + r^2 * p
  __m256 const r2 = _mm256_mul_ps(r, r);
  __m256 const er = _mm256_add_ps(_mm256_fmadd_ps(p, r2, r), one);

  // 2^n: (n + 127) << 23 is the bit pattern of 2^n for -126 <= n <= 127.
  __m256i const e = _mm256_slli_epi32(
      _mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(er, _mm256_castsi256_ps(e));
}

} // namespace

namespace multi_kernel {

void silu_avx2(float *out, float const *in, int64_t n) {
  __m256 const one = _mm256_set1_ps(1.0f);
  __m256 const sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    __m256 const x = _mm256_loadu_ps(in + i);
    __m256 const e = exp256(_mm256_xor_ps(x, sign)); // exp(-x)
    _mm256_storeu_ps(out + i, _mm256_div_ps(x, _mm256_add_ps(one, e)));
  }
  for (; i < n; ++i) {
    float const x = in[i];
    out[i] = x / (1.0f + std::exp(-x));
  }
}

} // namespace multi_kernel

#else // not x86_64: never called (the binding checks the architecture).

namespace multi_kernel {

void silu_avx2(float *out, float const *in, int64_t n) {
  silu_portable(out, in, n);
}

} // namespace multi_kernel

#endif
