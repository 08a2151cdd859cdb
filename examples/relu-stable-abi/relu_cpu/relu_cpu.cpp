// CPU relu written against the Torch stable ABI only (torch/csrc/stable and
// torch/headeronly): the library links against no C++ symbol of ATen/c10,
// so one build loads with every Torch >= the targeted ABI version.
#include <torch/csrc/stable/ops.h>
#include <torch/csrc/stable/tensor.h>
#include <torch/headeronly/core/Dispatch.h>
#include <torch/headeronly/core/ScalarType.h>
#include <torch/headeronly/util/Exception.h>

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
void relu_impl(torch::stable::Tensor &out, torch::stable::Tensor const &input) {
  scalar_t *__restrict__ o = out.mutable_data_ptr<scalar_t>();
  scalar_t const *__restrict__ in = input.const_data_ptr<scalar_t>();
  torch::stable::parallel_for(
      0, input.numel(), /*grain_size=*/32768, [&](int64_t begin, int64_t end) {
        for (int64_t i = begin; i < end; ++i) {
          scalar_t const x = in[i];
          // `x < 0 ? 0 : x` keeps NaN and -0.0 exactly like torch.relu.
          o[i] = static_cast<opmath_t<scalar_t>>(x) < opmath_t<scalar_t>(0)
                     ? scalar_t(0)
                     : x;
        }
      });
}

} // namespace

void relu(torch::stable::Tensor &out, torch::stable::Tensor const &input) {
  STD_TORCH_CHECK(input.is_cpu(), "relu: input must be a CPU tensor");
  STD_TORCH_CHECK(out.is_cpu(), "relu: out must be a CPU tensor");
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

  THO_DISPATCH_SWITCH(
      input.scalar_type(), "relu_cpu",
      THO_DISPATCH_CASE(ScalarType::Float, [&] { relu_impl<scalar_t>(out, input); })
      THO_DISPATCH_CASE(ScalarType::Double, [&] { relu_impl<scalar_t>(out, input); })
      THO_DISPATCH_CASE(ScalarType::Half, [&] { relu_impl<scalar_t>(out, input); })
      THO_DISPATCH_CASE(ScalarType::BFloat16, [&] { relu_impl<scalar_t>(out, input); }));
}
