// Type names and exception descriptions.

#include <cstdlib>
#include <cxxabi.h>
#include <memory>
#include <string>
#include <string_view>
#include <typeinfo>

#include <dpipe/core/type_name.hpp>

namespace dpipe {
namespace detail {

std::string tidy_type_name(std::string_view raw) {
  static constexpr std::pair<std::string_view, std::string_view> kRewrites[] = {
      {"std::__cxx11::basic_string<char>", "std::string"},
      {"std::basic_string<char>", "std::string"},
      {"std::__cxx11::", "std::"},
  };
  std::string name;
  name.reserve(raw.size());
  while (!raw.empty()) {
    bool rewritten = false;
    for (const auto& [from, to] : kRewrites) {
      if (raw.starts_with(from)) {
        name.append(to);
        raw.remove_prefix(from.size());
        rewritten = true;
        break;
      }
    }
    if (!rewritten) {
      name.push_back(raw.front());
      raw.remove_prefix(1);
    }
  }
  return name;
}

std::string demangle(const char* mangled) {
  int status = 0;
  const std::unique_ptr<char, void (*)(void*)> readable(abi::__cxa_demangle(mangled, nullptr, nullptr, &status),
                                                        std::free);
  return tidy_type_name(status == 0 && readable ? readable.get() : mangled);
}

namespace {

/// The name of the type an exception was thrown as. std::throw_with_nested(E) throws a library
/// type derived from E (libstdc++'s std::_Nested_exception<E>): it is named E.
std::string thrown_type_name(const std::type_info& type) {
  std::string name = demangle(type.name());
  constexpr std::string_view kNested = "std::_Nested_exception<";
  if (name.starts_with(kNested) && name.ends_with('>'))
    return name.substr(kNested.size(), name.size() - kNested.size() - 1);
  return name;
}

}  // namespace

ExceptionDescription describe_current_exception() {
  try {
    throw;
  } catch (const std::exception& exception) {
    return {thrown_type_name(typeid(exception)), exception.what()};
  } catch (...) {
    const std::type_info* type = abi::__cxa_current_exception_type();
    return {type != nullptr ? demangle(type->name()) : std::string("an unknown exception"), "(not a std::exception)",
            false};
  }
}

std::string describe(const std::exception_ptr& error) {
  try {
    std::rethrow_exception(error);
  } catch (...) {
    const ExceptionDescription description = describe_current_exception();
    return description.is_std_exception ? description.type + ": " + description.message : description.type;
  }
}

}  // namespace detail
}  // namespace dpipe
