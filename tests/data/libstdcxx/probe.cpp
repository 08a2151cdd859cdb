// A Torch op library that touches every part of libstdc++ with process-wide
// state: std::regex and std::locale (facet ids, the global locale),
// std::cout, exceptions thrown and caught on both sides of the library
// boundary, and std::string passed to and from Torch. tests/e2e/
// test_libstdcxx.py links it five ways (dynamic libstdc++; static, with or
// without hidden symbols, with a static or a shared libgcc unwinder) and
// loads each into a Python process with Torch (docs/libstdcxx.md).
#include <ATen/ops/empty.h>
#include <c10/core/Device.h>
#include <torch/library.h>

#include <cxxabi.h>
#include <dlfcn.h>

#include <cstdint>
#include <exception>
#include <iostream>
#include <locale>
#include <new>
#include <regex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

// Prints integers in groups of three, separated by commas.
struct CommaGrouping : std::numpunct<char> {
  char do_thousands_sep() const override { return ','; }
  std::string do_grouping() const override { return "\3"; }
};

std::string basename_of_object(const void* address) {
  Dl_info info;
  if (dladdr(address, &info) == 0 || info.dli_fname == nullptr) {
    return "?";
  }
  std::string path = info.dli_fname;
  return path.substr(path.rfind('/') + 1);
}

// The object each of these libstdc++ symbols was bound to in this library:
// its own static copy or the process's libstdc++.so.6.
std::vector<std::string> bindings() {
  using New = void* (*)(std::size_t);
  const std::vector<std::pair<std::string, const void*>> symbols = {
      {"std::cout", &std::cout},
      {"std::locale::classic", reinterpret_cast<const void*>(&std::locale::classic)},
      {"std::ctype<char>::id", &std::ctype<char>::id},
      {"std::uncaught_exceptions", reinterpret_cast<const void*>(&std::uncaught_exceptions)},
      {"__cxa_throw", reinterpret_cast<const void*>(&__cxxabiv1::__cxa_throw)},
      {"operator new", reinterpret_cast<const void*>(static_cast<New>(&::operator new))},
  };
  std::vector<std::string> found;
  for (const auto& [name, address] : symbols) {
    found.push_back(name + "=" + basename_of_object(address));
  }
  return found;
}

std::vector<std::string> regex_groups(const std::string& pattern, const std::string& text) {
  std::smatch match;
  std::vector<std::string> groups;
  if (std::regex_search(text, match, std::regex(pattern))) {
    for (const auto& group : match) {
      groups.push_back(group.str());
    }
  }
  return groups;
}

// Formats with the global locale of the libstdc++ this library uses.
std::string format_int(int64_t value) {
  std::ostringstream out;
  out << value;
  return out.str();
}

// Formats with a locale made here and read back with use_facet.
std::string format_grouped(int64_t value) {
  const std::locale grouped(std::locale::classic(), new CommaGrouping);
  std::ostringstream out;
  out.imbue(grouped);
  out << value << std::use_facet<std::numpunct<char>>(grouped).thousands_sep();
  return out.str();
}

void set_global_grouping() {
  std::locale::global(std::locale(std::locale::classic(), new CommaGrouping));
}

void write_cout(const std::string& text) {
  std::cout << text << std::endl;
}

void throw_runtime(const std::string& message) {
  throw std::runtime_error(message);
}

void torch_check(const std::string& message) {
  TORCH_CHECK(false, message);
}

std::string catch_own() {
  try {
    throw_runtime("caught in the kernel");
  } catch (const std::exception& error) {
    return error.what();
  }
  return "not caught";
}

std::string first_line(const char* text) {
  const std::string all = text;
  return all.substr(0, all.find('\n'));
}

// The first line of an exception thrown inside Torch (libc10's c10::Error),
// caught here as `Caught`.
template <class Caught>
std::string caught_from_torch() {
  try {
    at::empty({6}).view({7});
  } catch (const Caught& error) {
    return first_line(error.what());
  }
  return "not caught";
}

// Caught by its own type and by its base class std::exception.
std::vector<std::string> catch_torch() {
  return {caught_from_torch<c10::Error>(), caught_from_torch<std::exception>()};
}

// std::uncaught_exceptions() as this library's libstdc++ counts it, and as
// the process's libstdc++.so.6 counts it.
std::vector<int64_t> uncaught_exceptions() {
  std::vector<int64_t> counts = {std::uncaught_exceptions()};
  void* shared = dlopen("libstdc++.so.6", RTLD_NOW | RTLD_NOLOAD);
  if (shared != nullptr) {
    auto count = reinterpret_cast<int (*)()>(dlsym(shared, "_ZSt19uncaught_exceptionsv"));
    counts.push_back(count());
    dlclose(shared);
  }
  return counts;
}

// A std::string made here read by Torch, and one made by Torch read here.
std::string device_name(const std::string& name) {
  return c10::Device(name).str();
}

}  // namespace

TORCH_LIBRARY(libstdcxx_probe, m) {
  m.def("bindings() -> str[]", &bindings);
  m.def("regex_groups(str pattern, str text) -> str[]", &regex_groups);
  m.def("format_int(int value) -> str", &format_int);
  m.def("format_grouped(int value) -> str", &format_grouped);
  m.def("set_global_grouping() -> ()", &set_global_grouping);
  m.def("write_cout(str text) -> ()", &write_cout);
  m.def("throw_runtime(str message) -> ()", &throw_runtime);
  m.def("torch_check(str message) -> ()", &torch_check);
  m.def("catch_own() -> str", &catch_own);
  m.def("catch_torch() -> str[]", &catch_torch);
  m.def("uncaught_exceptions() -> int[]", &uncaught_exceptions);
  m.def("device_name(str name) -> str", &device_name);
}
