#include <torch/library.h>

#include "activation/activation.h"
#include "registration.h"
#include "torch_binding.h"

namespace {

bool cpu_has_avx2_fma() {
#if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
  static bool const supported = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return supported;
#else
  return false;
#endif
}

void check_silu_args(torch::Tensor const &out, torch::Tensor const &input) {
  TORCH_CHECK(input.device().is_cpu() && out.device().is_cpu(),
              "silu: input and out must be CPU tensors");
  TORCH_CHECK(input.scalar_type() == torch::kFloat &&
                  out.scalar_type() == torch::kFloat,
              "silu: only float32 is supported, got ", input.scalar_type(),
              " and ", out.scalar_type());
  TORCH_CHECK(input.sizes() == out.sizes(),
              "silu: input and out must have the same shape, got ",
              input.sizes(), " and ", out.sizes());
  TORCH_CHECK(input.is_contiguous() && out.is_contiguous(),
              "silu: input and out must be contiguous");
}

} // namespace

void silu(torch::Tensor &out, torch::Tensor const &input) {
  check_silu_args(out, input);
  float *o = out.data_ptr<float>();
  float const *in = input.data_ptr<float>();
  int64_t const n = input.numel();
  if (cpu_has_avx2_fma()) {
    multi_kernel::silu_avx2(o, in, n);
  } else {
    multi_kernel::silu_portable(o, in, n);
  }
}

void silu_portable(torch::Tensor &out, torch::Tensor const &input) {
  check_silu_args(out, input);
  multi_kernel::silu_portable(out.data_ptr<float>(), input.data_ptr<float>(),
                              input.numel());
}

std::string silu_variant() {
  return cpu_has_avx2_fma() ? "avx2" : "portable";
}

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("silu(Tensor! out, Tensor input) -> ()");
  ops.impl("silu", torch::kCPU, &silu);
  ops.def("silu_portable(Tensor! out, Tensor input) -> ()");
  ops.impl("silu_portable", torch::kCPU, &silu_portable);
  ops.def("silu_variant() -> str", &silu_variant);
  ops.def("scale(Tensor! out, Tensor input, float factor) -> ()");
  ops.impl("scale", torch::kCPU, &scale);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
