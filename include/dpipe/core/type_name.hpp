#pragma once
/// \file
/// Human-readable names of C++ types, used in error messages ("expected int, got std::string").

#include <exception>
#include <string>
#include <string_view>

namespace dpipe {
namespace detail {

template <class T>
constexpr std::string_view raw_type_name() noexcept {
  // GCC:   "... raw_type_name() [with T = int; std::string_view = ...]"
  // Clang: "... raw_type_name() [T = int]"
  constexpr std::string_view pretty = __PRETTY_FUNCTION__;
  constexpr std::size_t start = pretty.find("T = ") + 4;
  constexpr std::size_t semicolon = pretty.find(';', start);
  constexpr std::size_t end = semicolon == std::string_view::npos ? pretty.rfind(']') : semicolon;
  return pretty.substr(start, end - start);
}

/// Rewrites the long spellings compilers use for standard types ("std::__cxx11::basic_string<char>",
/// "std::vector<int, std::allocator<int> >") into the ones users write ("std::string",
/// "std::vector<int>"), so that a type has one name whichever translation unit spells it.
/// Idempotent.
std::string tidy_type_name(std::string_view raw);

/// The readable name of a mangled type name (a std::type_info::name()).
std::string demangle(const char* mangled);

/// The type name and the message of an exception (`what()`, or "(not a std::exception)").
struct ExceptionDescription {
  std::string type;
  std::string message;
  bool is_std_exception = true;  ///< false: `message` only says that it was not one
};

/// Describes the exception being handled; call inside a catch block.
ExceptionDescription describe_current_exception();

/// The type and message of the exception in `error`: "std::out_of_range: three".
std::string describe(const std::exception_ptr& error);

}  // namespace detail

/// Returns the name of `T` as users spell it, e.g. "std::vector<long int>". Thread-safe.
template <class T>
const std::string& type_name() {
  static const std::string name = detail::tidy_type_name(detail::raw_type_name<T>());
  return name;
}

}  // namespace dpipe
