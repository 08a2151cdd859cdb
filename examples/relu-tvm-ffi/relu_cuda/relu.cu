// relu for contiguous float32 tensors on a CUDA device, on the current stream
// of the tensors' device as TVM FFI knows it (the caller's, e.g. Torch's).
#include <tvm/ffi/extra/c_env_api.h>
#include <tvm/ffi/tvm_ffi.h>

#include <cuda_runtime.h>

#include <cstdint>

namespace {

__global__ void relu_kernel(float* out, const float* input, int64_t n) {
  int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n) {
    float value = input[i];
    out[i] = (value > 0.0f || value != value) ? value : 0.0f;
  }
}

bool is_float32(DLDataType dtype) {
  return dtype.code == kDLFloat && dtype.bits == 32 && dtype.lanes == 1;
}

}  // namespace

void relu_cuda(tvm::ffi::TensorView out, tvm::ffi::TensorView input) {
  TVM_FFI_ICHECK(input.device().device_type == kDLCUDA) << "relu_cuda: input is not on a GPU";
  TVM_FFI_ICHECK(out.device().device_type == kDLCUDA) << "relu_cuda: out is not on a GPU";
  TVM_FFI_ICHECK(is_float32(input.dtype()) && is_float32(out.dtype()))
      << "relu_cuda: only float32 tensors are supported";
  TVM_FFI_ICHECK(input.IsContiguous() && out.IsContiguous())
      << "relu_cuda: the tensors must be contiguous";
  TVM_FFI_ICHECK(input.numel() == out.numel())
      << "relu_cuda: out has " << out.numel() << " elements, input " << input.numel();
  int64_t n = input.numel();
  if (n == 0) {
    return;
  }
  auto stream = static_cast<cudaStream_t>(
      TVMFFIEnvGetStream(input.device().device_type, input.device().device_id));
  constexpr int threads = 256;
  int64_t blocks = (n + threads - 1) / threads;
  relu_kernel<<<blocks, threads, 0, stream>>>(static_cast<float*>(out.data_ptr()),
                                              static_cast<const float*>(input.data_ptr()), n);
  cudaError_t status = cudaGetLastError();
  TVM_FFI_ICHECK(status == cudaSuccess) << "relu_cuda: " << cudaGetErrorString(status);
}
