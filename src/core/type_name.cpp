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

namespace {

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (std::size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

/// Erases each template argument that starts with `argument` (", std::allocator<"), through its
/// closing '>', and the space before the list's own '>' ("vector<int, std::allocator<int> >").
void erase_arguments(std::string& text, std::string_view argument) {
  for (std::size_t at = text.find(argument); at != std::string::npos; at = text.find(argument, at)) {
    std::size_t end = at + argument.size();
    for (int depth = 1; depth > 0; ++end) {
      if (end == text.size()) return;  // unbalanced: leave the rest as it is
      if (text[end] == '<') ++depth;
      if (text[end] == '>') --depth;
    }
    if (end + 1 < text.size() && text[end] == ' ' && text[end + 1] == '>') ++end;
    text.erase(at, end - at);
  }
}

}  // namespace

std::string tidy_type_name(std::string_view raw) {
  std::string name(raw);
  replace_all(name, "std::__cxx11::", "std::");
  // The default arguments of the standard strings, containers and smart pointers, which compilers
  // spell out in some contexts and not in others: the same type always gets the same name. (Two
  // types that differ only in such an argument, a non-default std::less say, get one name.)
  for (const std::string_view argument : {", std::char_traits<", ", std::less<", ", std::hash<", ", std::equal_to<",
                                          ", std::default_delete<", ", std::allocator<"}) {
    erase_arguments(name, argument);
  }
  for (std::size_t at = name.find("> >"); at != std::string::npos; at = name.find("> >", at > 0 ? at - 1 : 0)) {
    name.erase(at + 1, 1);
  }
  replace_all(name, "std::basic_string<char>", "std::string");
  replace_all(name, "std::basic_string_view<char>", "std::string_view");
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
