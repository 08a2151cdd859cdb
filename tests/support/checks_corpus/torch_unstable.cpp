// Plant for stable-ABI variants: libtorch C++ API symbols (at::, c10::, torch::),
// next to a torch::stable:: call that is fine. No torch headers needed: the
// declarations alone make the linker record the undefined symbols.
namespace at {
void manual_seed(unsigned long seed);
}
namespace c10 {
template <typename T>
T checked_convert(double value);
}
namespace torch {
namespace jit {
void setGraphExecutorOptimize(bool optimize);
}
namespace stable {
void synchronize();
}
}  // namespace torch

extern "C" int kn_unstable(double value) {
    at::manual_seed(7);
    torch::jit::setGraphExecutorOptimize(false);
    torch::stable::synchronize();
    return c10::checked_convert<int>(value);
}
