// relu for contiguous float32 tensors on the CPU: out[i] = max(input[i], 0),
// NaN kept and -0.0 made 0.0 (as torch.relu does).
#include <tvm/ffi/tvm_ffi.h>

#include <cstdint>

namespace {

bool is_float32(DLDataType dtype) {
  return dtype.code == kDLFloat && dtype.bits == 32 && dtype.lanes == 1;
}

}  // namespace

void relu_cpu(tvm::ffi::TensorView out, tvm::ffi::TensorView input) {
  TVM_FFI_ICHECK(input.device().device_type == kDLCPU) << "relu_cpu: input is not on the CPU";
  TVM_FFI_ICHECK(out.device().device_type == kDLCPU) << "relu_cpu: out is not on the CPU";
  TVM_FFI_ICHECK(is_float32(input.dtype()) && is_float32(out.dtype()))
      << "relu_cpu: only float32 tensors are supported";
  TVM_FFI_ICHECK(input.IsContiguous() && out.IsContiguous())
      << "relu_cpu: the tensors must be contiguous";
  TVM_FFI_ICHECK(input.numel() == out.numel())
      << "relu_cpu: out has " << out.numel() << " elements, input " << input.numel();
  const float* source = static_cast<const float*>(input.data_ptr());
  float* target = static_cast<float*>(out.data_ptr());
  for (int64_t i = 0; i < input.numel(); ++i) {
    float value = source[i];
    target[i] = (value > 0.0f || value != value) ? value : 0.0f;
  }
}
