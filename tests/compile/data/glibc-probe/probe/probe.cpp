#include <mutex>
#include <random>
#include <stdexcept>
#include <string>
#include <thread>

#include <torch/all.h>

// out = input + n, computed on a thread of its own after a call_once.
void add_on_thread(torch::Tensor &out, torch::Tensor const &input, int64_t n) {
  static std::once_flag once;
  static int64_t offset = -1;
  std::call_once(once, [] { offset = 0; });
  std::thread worker([&] { out.copy_(input + (n + offset)); });
  worker.join();
}

// A number from std::random_device (arc4random in a newer glibc's libstdc++).
int64_t random_number() {
  std::random_device device;
  return static_cast<int64_t>(device() % 1000);
}

// Throws a plain C++ exception, or Torch's own through TORCH_CHECK.
void fail(int64_t how) {
  if (how == 0) {
    throw std::runtime_error("probe: a std::runtime_error from the kernel");
  }
  TORCH_CHECK(how != 1, "probe: a TORCH_CHECK from the kernel");
}
