// Plant: floating-point std::to_chars is GLIBCXX_3.4.29 (GCC 11+); dynamic libstdc++.
#include <charconv>

extern "C" int kn_format(double value, char *buffer, int size) {
    auto result = std::to_chars(buffer, buffer + size, value);
    return static_cast<int>(result.ptr - buffer);
}
