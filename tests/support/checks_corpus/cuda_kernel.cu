// A CUDA kernel library, linked against the shared CUDA runtime (libcudart.so.N):
// clean for manylinux_2_28 (nvcc's default static cudart would pull GLIBC_2.34
// pthread/dl symbols when linked on a glibc 2.36 host).
#include <cuda_runtime.h>

__global__ void kn_scale(float *values, float factor, int count) {
    int index = blockIdx.x * blockDim.x + threadIdx.x;
    if (index < count) values[index] *= factor;
}

extern "C" int kn_launch_scale(float *values, float factor, int count) {
    kn_scale<<<(count + 255) / 256, 256>>>(values, factor, count);
    return static_cast<int>(cudaGetLastError());
}
