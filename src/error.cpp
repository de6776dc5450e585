// Type-name tidying and the stale-iterator error.

#include <string>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/error.hpp>
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

void throw_stale_iterator(const DataPipe& node) {
  DPIPE_THROW(UsageError,
              "This iterator has been invalidated because another iterator has been created from "
              "the same IterDataPipe: {}\nThis may be caused multiple references to the same "
              "IterDataPipe. We recommend using `.fork()` if that is necessary.\nFor feedback regarding "
              "this single iterator per IterDataPipe constraint, feel free to comment on this issue: "
              "https://github.com/pytorch/data/issues/45.",
              node.label());
}

}  // namespace detail
}  // namespace dpipe
