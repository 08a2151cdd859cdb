#include <metal_stdlib>
using namespace metal;

// One thread per element; `n` guards the tail when the grid is rounded up.
// `x < 0 ? 0 : x` keeps NaN and -0.0 like torch.relu.
template <typename T>
kernel void relu_kernel(device const T *input [[buffer(0)]],
                        device T *output [[buffer(1)]],
                        constant uint &n [[buffer(2)]],
                        uint index [[thread_position_in_grid]]) {
  if (index >= n) {
    return;
  }
  T const x = input[index];
  output[index] = x < T(0) ? T(0) : x;
}

template [[host_name("relu_float")]] kernel void
relu_kernel<float>(device const float *, device float *, constant uint &, uint);

template [[host_name("relu_half")]] kernel void
relu_kernel<half>(device const half *, device half *, constant uint &, uint);
