#include <algorithm>

#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/io/webdataset.hpp>
#include <dpipe/io/webdataset_fields.hpp>

namespace dpipe::io {
namespace detail {

void throw_missing_field(std::string_view key, std::string_view suffixes, std::string_view present) {
  DPIPE_THROW(KeyError, "webdataset: the sample '{}' has no field '{}' (it has {})", key, suffixes, present);
}

void check_suffixes(std::string_view who, std::string_view suffixes, bool alternatives) {
  if (!alternatives && suffixes.find(';') != std::string_view::npos)
    DPIPE_THROW(InvalidArgument, "{}: the suffix '{}' names alternatives (';'); name one suffix", who, suffixes);
  any_suffix(suffixes, [&](std::string_view suffix) {
    if (suffix.size() < 2 || suffix.front() != '.')
      DPIPE_THROW(InvalidArgument, "{}: the suffix '{}' does not start with '.' (write \".cls\", not \"cls\")", who,
                  suffixes);
    return false;
  });
}

void throw_field_type(std::string_view key, std::string_view suffix, std::string_view type) {
  DPIPE_THROW(InvalidArgument, "webdataset: the field '{}' of the sample '{}' holds another type than {}", suffix, key,
              type);
}

}  // namespace detail

std::pair<std::string, std::string> webdataset_split(std::string_view path) {
  std::string normal(path);
  std::replace(normal.begin(), normal.end(), '\\', '/');
  const auto slash = normal.rfind('/');
  const auto dot = normal.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {normal, ""};
  return {normal.substr(0, dot), normal.substr(dot)};
}

WebDatasetGrouper::WebDatasetGrouper(const IterPipe<PathBytes>& members, WebDatasetOptions options)
    : IterDataPipe<WebDatasetSample>(std::string(kName)),
      members_(members.ptr()),
      options_(std::move(options)),
      skipper_(options_.on_error) {
  for (const auto& suffixes : options_.required_suffixes) detail::check_suffixes(kName, suffixes);
}

NodeSettings WebDatasetGrouper::settings() const {
  if (options_.required_suffixes.empty()) return {};
  std::string required;
  for (const auto& suffixes : options_.required_suffixes) required += (required.empty() ? "" : ",") + suffixes;
  return {{"required_suffixes", required}};
}

void WebDatasetGrouper::reset_impl() {
  ahead_.reset();
  skipper_.reset();
  members_.reset();
}

std::optional<WebDatasetSample> WebDatasetGrouper::next_impl() {
  while (auto sample = next_sample()) {
    try {
      check_required(*sample);
      return sample;
    } catch (const DataError& error) {
      skipper_.skip_bad_data(error);
      count_skipped();
    }
  }
  return std::nullopt;
}

std::optional<WebDatasetSample> WebDatasetGrouper::next_sample() {
  auto sample = std::exchange(ahead_, std::nullopt);
  while (auto member = members_.next()) {
    auto [key, suffix] = webdataset_split(member->first);
    if (suffix.empty()) continue;
    if (sample && sample->key != key) {
      ahead_ = WebDatasetSample{std::move(key), {}};
      ahead_->fields.emplace_back(std::move(suffix), std::move(member->second));
      return sample;
    }
    if (!sample) sample = WebDatasetSample{std::move(key), {}};
    auto& fields = sample->fields;  // a member's suffix is matched exactly: ';' names no alternatives here
    const auto same =
        std::find_if(fields.begin(), fields.end(), [&](const auto& field) { return field.first == suffix; });
    if (same != fields.end()) {
      same->second = std::move(member->second);
    } else {
      fields.emplace_back(std::move(suffix), std::move(member->second));
    }
  }
  return sample;
}

void WebDatasetGrouper::check_required(const WebDatasetSample& sample) const {
  std::string missing;
  for (const auto& suffixes : options_.required_suffixes)
    if (!sample.find(suffixes)) missing += (missing.empty() ? "" : ", ") + suffixes;
  if (missing.empty()) return;
  const auto slash = sample.key.rfind('/');
  const auto shard = slash == std::string::npos ? std::string() : sample.key.substr(0, slash);
  const auto name = slash == std::string::npos ? sample.key : sample.key.substr(slash + 1);
  throw DataError(label(), {.path = shard},
                  fmt::format("the sample '{}' lacks {} (it has {})", name, missing, sample.suffix_list()));
}

bool RenameFields::named(std::string_view suffix) const {
  return std::any_of(aliases_.begin(), aliases_.end(), [&](const auto& alias) {
    return alias.first == suffix ||
           detail::any_suffix(alias.second, [&](std::string_view named) { return named == suffix; });
  });
}

bool WebDatasetGrouper::save_state(StateWriter& writer) const {
  writer.write("ahead", ahead_);
  skipper_.save_state(writer);
  return true;
}

void WebDatasetGrouper::load_state(const StateReader& reader) {
  ahead_ = reader.read<std::optional<WebDatasetSample>>("ahead");
  // A checkpoint written before required_suffixes existed has no skip count: none was skipped.
  if (reader.has("skipped")) {
    skipper_.load_state(reader);
  } else {
    skipper_.reset();
  }
}

}  // namespace dpipe::io
