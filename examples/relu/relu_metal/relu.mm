// Metal relu: dispatches the compute kernels of relu.metal on torch's current
// MPS stream. The build compiles relu.metal into a metallib and embeds it in a
// generated header, named by EMBEDDED_METALLIB_HEADER, that provides
// EMBEDDED_METALLIB_NAMESPACE::createLibrary(device, &error).
#include <torch/torch.h>

#include <ATen/mps/MPSDevice.h>
#include <ATen/mps/MPSStream.h>

#import <Foundation/Foundation.h>
#import <Metal/Metal.h>

#include <algorithm>
#include <limits>
#include <mutex>
#include <string>
#include <unordered_map>

#ifdef EMBEDDED_METALLIB_HEADER
#include EMBEDDED_METALLIB_HEADER
#else
#error "EMBEDDED_METALLIB_HEADER not defined"
#endif

namespace {

inline id<MTLBuffer> getMTLBufferStorage(torch::Tensor const &tensor) {
  return __builtin_bit_cast(id<MTLBuffer>, tensor.storage().data());
}

inline NSUInteger byteOffset(torch::Tensor const &tensor) {
  return static_cast<NSUInteger>(tensor.storage_offset() *
                                 tensor.element_size());
}

id<MTLComputePipelineState> pipelineFor(std::string const &name) {
  static std::mutex mutex;
  static id<MTLLibrary> library = nil;
  static std::unordered_map<std::string, id<MTLComputePipelineState>> cache;

  std::lock_guard<std::mutex> lock(mutex);
  auto it = cache.find(name);
  if (it != cache.end()) {
    return it->second;
  }

  id<MTLDevice> device = at::mps::MPSDevice::getInstance()->device();
  NSError *error = nil;
  if (library == nil) {
    library = EMBEDDED_METALLIB_NAMESPACE::createLibrary(device, &error);
    TORCH_CHECK(library != nil, "relu: failed to load the embedded metallib: ",
                error ? [[error localizedDescription] UTF8String] : "unknown error");
  }

  id<MTLFunction> function =
      [library newFunctionWithName:[NSString stringWithUTF8String:name.c_str()]];
  TORCH_CHECK(function != nil, "relu: no Metal function named ", name);

  id<MTLComputePipelineState> pso =
      [device newComputePipelineStateWithFunction:function error:&error];
  TORCH_CHECK(pso != nil, "relu: failed to create the pipeline for ", name, ": ",
              error ? [[error localizedDescription] UTF8String] : "unknown error");
  cache.emplace(name, pso);
  return pso;
}

} // namespace

void relu(torch::Tensor &out, torch::Tensor const &input) {
  TORCH_CHECK(input.device().is_mps(), "relu: input must be an MPS tensor");
  TORCH_CHECK(out.device() == input.device(),
              "relu: input and out must be on the same device");
  TORCH_CHECK(input.scalar_type() == out.scalar_type(),
              "relu: input and out must have the same dtype, got ",
              input.scalar_type(), " and ", out.scalar_type());
  TORCH_CHECK(input.sizes() == out.sizes(),
              "relu: input and out must have the same shape, got ",
              input.sizes(), " and ", out.sizes());
  TORCH_CHECK(input.is_contiguous(), "relu: input must be contiguous");
  TORCH_CHECK(out.is_contiguous(), "relu: out must be contiguous");

  std::string kernelName;
  switch (input.scalar_type()) {
  case torch::kFloat:
    kernelName = "relu_float";
    break;
  case torch::kHalf:
    kernelName = "relu_half";
    break;
  default:
    TORCH_CHECK(false, "relu: unsupported dtype on MPS: ", input.scalar_type(),
                " (supported: float32, float16)");
  }

  int64_t const numel = input.numel();
  if (numel == 0) {
    return;
  }
  TORCH_CHECK(numel <= std::numeric_limits<uint32_t>::max(),
              "relu: tensors with more than 2^32-1 elements are not supported");
  uint32_t const n = static_cast<uint32_t>(numel);

  id<MTLComputePipelineState> pso = pipelineFor(kernelName);
  at::mps::MPSStream *stream = at::mps::getCurrentMPSStream();
  TORCH_CHECK(stream != nullptr, "relu: no current MPS stream");

  @autoreleasepool {
    dispatch_sync(stream->queue(), ^() {
      id<MTLComputeCommandEncoder> encoder = stream->commandEncoder();
      [encoder setComputePipelineState:pso];
      [encoder setBuffer:getMTLBufferStorage(input)
                  offset:byteOffset(input)
                 atIndex:0];
      [encoder setBuffer:getMTLBufferStorage(out) offset:byteOffset(out) atIndex:1];
      [encoder setBytes:&n length:sizeof(n) atIndex:2];

      NSUInteger const groupSize = std::min<NSUInteger>(
          pso.maxTotalThreadsPerThreadgroup, static_cast<NSUInteger>(n));
      [encoder dispatchThreads:MTLSizeMake(n, 1, 1)
          threadsPerThreadgroup:MTLSizeMake(groupSize, 1, 1)];
    });
  }
  // The work stays queued on torch's stream (like a native MPS op); torch
  // commits it on its next synchronization point.
}
