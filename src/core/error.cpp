#include <dpipe/core/error.hpp>

namespace dpipe {
namespace {

std::string describe(std::string_view node, const DataError::Where& where, std::string_view reason) {
  std::string text = fmt::format("{}: '{}'", node, where.path);
  if (!where.member.empty()) text += fmt::format(" member '{}'", where.member);
  if (where.line) text += fmt::format(" line {}", *where.line);
  if (where.byte_offset) text += fmt::format(" byte offset {}", *where.byte_offset);
  text += fmt::format(": {}", reason);
  return text;
}

}  // namespace

DataError::DataError(std::string_view node, Where where, std::string_view reason)
    : Error(describe(node, where, reason)), where_(std::move(where)) {}

}  // namespace dpipe
