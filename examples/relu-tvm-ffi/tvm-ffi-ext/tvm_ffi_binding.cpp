// The kernel's functions, exported through TVM FFI: the library that
// tvm_ffi.load_module opens resolves each one by its exported name.
#include <tvm/ffi/tvm_ffi.h>

#ifdef CPU_KERNEL
void relu_cpu(tvm::ffi::TensorView out, tvm::ffi::TensorView input);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(relu_cpu, relu_cpu);
#endif

#ifdef CUDA_KERNEL
void relu_cuda(tvm::ffi::TensorView out, tvm::ffi::TensorView input);
TVM_FFI_DLL_EXPORT_TYPED_FUNC(relu_cuda, relu_cuda);
#endif
