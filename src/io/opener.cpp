#include <algorithm>
#include <map>
#include <mutex>
#include <utility>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/io/opener.hpp>

#include "io/opener_registry.hpp"

namespace dpipe::io {
namespace {

bool is_letter(char c) noexcept { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }

/// The length of the scheme `text` starts with (a letter, then letters, digits, '+', '-' or '.',
/// RFC 3986's syntax, either case), 0 when it starts with none.
std::size_t scheme_length(std::string_view text) noexcept {
  if (text.empty() || !is_letter(text.front())) return 0;
  std::size_t length = 1;
  while (length < text.size()) {
    const char c = text[length];
    if (!is_letter(c) && !(c >= '0' && c <= '9') && c != '+' && c != '-' && c != '.') break;
    ++length;
  }
  return length;
}

/// The schemes and their openers, seeded with dpipe's own when first used. Entries are never
/// removed or replaced, so an opener found stays valid and is called without the lock (an opener
/// may open another origin: a decompressed stream reopens the file it decompresses).
class Registry {
 public:
  Registry() {
    const detail::AddOpener add = [this](std::string_view scheme, Opener opener) { insert(scheme, std::move(opener)); };
    detail::add_file_opener(add);
    detail::add_decompressed_openers(add);
    detail::add_http_openers(add);
    detail::add_s3_openers(add);
    listers_.emplace("s3", detail::s3_lister());
  }

  void insert(std::string_view scheme, Opener opener) {
    const std::lock_guard lock(mutex_);
    if (!openers_.try_emplace(std::string(scheme), std::move(opener)).second)
      DPIPE_THROW(InvalidArgument, "register_opener: the scheme '{}' has an opener already", scheme);
  }

  /// The opener of `scheme`, or nullptr.
  [[nodiscard]] const Opener* find(std::string_view scheme) const {
    const std::lock_guard lock(mutex_);
    const auto found = openers_.find(scheme);
    return found == openers_.end() ? nullptr : &found->second;
  }

  /// The lister of `scheme`, or nullptr. Listers are added only while the registry is seeded.
  [[nodiscard]] const detail::Lister* find_lister(std::string_view scheme) const {
    const auto found = listers_.find(scheme);
    return found == listers_.end() ? nullptr : &found->second;
  }

  [[nodiscard]] std::vector<std::string> schemes() const {
    const std::lock_guard lock(mutex_);
    std::vector<std::string> names;
    names.reserve(openers_.size());
    for (const auto& entry : openers_) names.push_back(entry.first);
    return names;
  }

 private:
  mutable std::mutex mutex_;
  std::map<std::string, Opener, std::less<>> openers_;
  std::map<std::string, detail::Lister, std::less<>> listers_;
};

Registry& registry() {
  static Registry instance;
  return instance;
}

}  // namespace

void register_opener(std::string_view scheme, Opener opener) {
  const bool lowercase = std::none_of(scheme.begin(), scheme.end(), [](char c) { return c >= 'A' && c <= 'Z'; });
  if (scheme.empty() || scheme_length(scheme) != scheme.size() || !lowercase)
    DPIPE_THROW(InvalidArgument,
                "register_opener: '{}' is not a scheme (a lowercase letter, then lowercase letters, digits, '+', '-' "
                "or '.')",
                scheme);
  if (!opener) DPIPE_THROW(InvalidArgument, "register_opener: the opener for '{}' is empty", scheme);
  registry().insert(scheme, std::move(opener));
}

std::vector<std::string> registered_schemes() { return registry().schemes(); }

namespace detail {

bool names_scheme(std::string_view path) noexcept {
  const std::size_t length = scheme_length(path);
  return length > 0 && path.substr(length).starts_with("://");
}

OpenedFile open_origin(const std::string& origin, std::string_view node) {
  const auto refuse = [&](const std::string& reason) {
    return DataError(node, {.path = origin},
                     fmt::format("cannot open: {} (registered: {})", reason, fmt::join(registered_schemes(), ", ")));
  };
  const std::size_t length = scheme_length(origin);
  if (length == 0 || (origin[length] != ':' && origin[length] != '[')) throw refuse("it starts with no scheme");
  const std::string_view scheme(origin.data(), length);
  const Opener* opener = registry().find(scheme);
  if (opener == nullptr) throw refuse(fmt::format("no opener is registered for the scheme '{}'", scheme));
  return (*opener)(origin, node);
}

std::vector<std::string> list_with_scheme(const std::string& root, const std::vector<std::string>& masks,
                                          bool recursive, std::string_view node) {
  const std::string_view scheme(root.data(), scheme_length(root));
  const Lister* lister = registry().find_lister(scheme);
  if (lister == nullptr)
    throw DataError(node, {.path = root}, fmt::format("cannot list: the scheme '{}' has no lister (s3 has)", scheme));
  return (*lister)(root, masks, recursive, node);
}

DataError malformed_origin(const std::string& origin, std::string_view scheme, std::string_view node) {
  return DataError(node, {.path = origin}, fmt::format("cannot open: not an origin the '{}' opener reads", scheme));
}

}  // namespace detail
}  // namespace dpipe::io
