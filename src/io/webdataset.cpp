#include <algorithm>

#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/io/webdataset.hpp>

namespace dpipe::io {

const std::string* WebDatasetSample::find(std::string_view suffix) const noexcept {
  for (const auto& [name, bytes] : fields)
    if (name == suffix) return &bytes;
  return nullptr;
}

const std::string& WebDatasetSample::operator[](std::string_view suffix) const {
  if (const auto* bytes = find(suffix)) return *bytes;
  std::string suffixes;
  for (const auto& field : fields) suffixes += (suffixes.empty() ? "" : ", ") + field.first;
  DPIPE_THROW(KeyError, "webdataset: the sample '{}' has no field '{}' (it has {})", key, suffix, suffixes);
}

std::pair<std::string, std::string> webdataset_split(std::string_view path) {
  std::string normal(path);
  std::replace(normal.begin(), normal.end(), '\\', '/');
  const auto slash = normal.rfind('/');
  const auto dot = normal.find('.', slash == std::string::npos ? 0 : slash + 1);
  if (dot == std::string::npos) return {normal, ""};
  return {normal.substr(0, dot), normal.substr(dot)};
}

void WebDatasetGrouper::reset_impl() {
  ahead_.reset();
  members_.reset();
}

std::optional<WebDatasetSample> WebDatasetGrouper::next_impl() {
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
    auto& fields = sample->fields;
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

bool WebDatasetGrouper::save_state(StateWriter& writer) const {
  writer.write("ahead", ahead_);
  return true;
}

void WebDatasetGrouper::load_state(const StateReader& reader) {
  ahead_ = reader.read<std::optional<WebDatasetSample>>("ahead");
}

}  // namespace dpipe::io
