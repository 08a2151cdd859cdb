// Clean C++ using only old libstdc++/libc symbols. Built twice: with a static
// libstdc++ (clean under every policy) and with a dynamic one (clean under
// manylinux_2_28, a forbidden DT_NEEDED under the kernel policy).
#include <algorithm>
#include <array>
#include <numeric>

struct Shape {
    virtual ~Shape() = default;
    virtual int area() const = 0;
};

struct Square : Shape {
    int side;
    explicit Square(int side) : side(side) {}
    int area() const override { return side * side; }
};

extern "C" int kn_sorted_sum(const int *data, int count) {
    std::array<int, 64> buffer{};
    int used = std::min(count, 64);
    std::copy(data, data + used, buffer.begin());
    std::sort(buffer.begin(), buffer.begin() + used);
    Square square(used);
    const Shape &shape = square;
    return std::accumulate(buffer.begin(), buffer.begin() + used, 0) + shape.area();
}
