// alpha * x with CuTe: the flat tensors are viewed as tiles of kTile elements,
// one thread block per tile, one element per thread.
#include <ATen/core/Tensor.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>

#include <cute/tensor.hpp>
#include <cutlass/version.h>

static_assert(CUTLASS_MAJOR == 3, "cute-scale is written for CUTLASS 3.x (cutlass_3_8)");

namespace {

constexpr int kTile = 256;

template <class Engine, class Layout>
__global__ void cute_scale_kernel(cute::Tensor<Engine, Layout> out,
                                  cute::Tensor<Engine, Layout> in, float alpha, int n) {
  using namespace cute;
  auto out_tile = local_tile(out, make_shape(Int<kTile>{}), make_coord(blockIdx.x));
  auto in_tile = local_tile(in, make_shape(Int<kTile>{}), make_coord(blockIdx.x));
  int const index = blockIdx.x * kTile + threadIdx.x;
  if (index < n) {
    out_tile(threadIdx.x) = alpha * in_tile(threadIdx.x);
  }
}

} // namespace

void cute_scale(at::Tensor &out, at::Tensor const &x, double alpha) {
  TORCH_CHECK(x.is_cuda() && out.device() == x.device(), "cute_scale: CUDA tensors on one device");
  TORCH_CHECK(x.scalar_type() == at::kFloat && out.scalar_type() == at::kFloat,
              "cute_scale: float32 tensors only");
  TORCH_CHECK(x.is_contiguous() && out.is_contiguous() && x.sizes() == out.sizes(),
              "cute_scale: contiguous tensors of one shape");
  int const n = static_cast<int>(x.numel());
  if (n == 0) {
    return;
  }
  c10::cuda::CUDAGuard const device_guard(x.device());
  // Padded to whole tiles: the kernel guards the tail.
  int const tiles = (n + kTile - 1) / kTile;
  auto layout = cute::make_layout(cute::make_shape(tiles * kTile));
  auto in = cute::make_tensor(cute::make_gmem_ptr(x.data_ptr<float>()), layout);
  auto result = cute::make_tensor(cute::make_gmem_ptr(out.data_ptr<float>()), layout);
  cute_scale_kernel<<<tiles, kTile, 0, c10::cuda::getCurrentCUDAStream()>>>(
      result, in, static_cast<float>(alpha), n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
