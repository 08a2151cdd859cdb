#include <torch/library.h>
#include <torch/torch.h>

#include "registration.h"

void add_on_thread(torch::Tensor &out, torch::Tensor const &input, int64_t n);
int64_t random_number();
void fail(int64_t how);

TORCH_LIBRARY_EXPAND(TORCH_EXTENSION_NAME, ops) {
  ops.def("add_on_thread(Tensor! out, Tensor input, int n) -> ()");
  ops.impl("add_on_thread", torch::kCPU, &add_on_thread);
  ops.def("random_number() -> int", &random_number);
  ops.def("fail(int how) -> ()", &fail);
}

REGISTER_EXTENSION(TORCH_EXTENSION_NAME)
