// C++ that needs the runtime's heavier parts: streams (locale facets) and
// exceptions with cleanups. Linked -static-libstdc++ -static-libgcc it exports
// libstdc++ and carries libgcc_eh's unwinder (the cxx-runtime rule's plants);
// linked the recommended way (hidden static libstdc++, shared unwinder) it is clean.
#include <sstream>
#include <stdexcept>
#include <string>

extern "C" int kn_format_checked(int value, char *out, int size) {
    std::ostringstream stream;
    stream << value;
    std::string text = stream.str();
    try {
        if (static_cast<int>(text.size()) >= size) {
            throw std::length_error("buffer too small");
        }
    } catch (const std::length_error &) {
        return -1;
    }
    text.copy(out, text.size());
    out[text.size()] = '\0';
    return static_cast<int>(text.size());
}
