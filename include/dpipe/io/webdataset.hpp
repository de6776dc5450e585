#pragma once
/// \file
/// `io::webdataset()` (torchdata's WebDataset): consecutive archive members that share a key
/// become one sample. Checkpoint state: the member read ahead of the sample last yielded.

#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/fields.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/load_from_archive.hpp>

namespace dpipe::io {

/// One WebDataset sample: its key (torchdata's "__key__": the member path before the first '.'
/// of its file name, "shards/a.tar/000017") and its fields, each a suffix (".jpg", ".seg.png")
/// with the member's bytes, in archive order. Thread-safety: a value type.
struct WebDatasetSample {
  std::string key;
  std::vector<std::pair<std::string, std::string>> fields;

  /// The bytes of the field with `suffix` (".cls"), or nullptr.
  [[nodiscard]] const std::string* find(std::string_view suffix) const noexcept;
  /// The bytes of the field with `suffix`; KeyError naming the key and the suffixes it has.
  [[nodiscard]] const std::string& operator[](std::string_view suffix) const;

  friend bool operator==(const WebDatasetSample&, const WebDatasetSample&) = default;
  DPIPE_FIELDS(key, fields)
};

/// Splits a member path into its WebDataset key and suffix: the suffix starts at the first '.'
/// of the last path component ("a.tar/x.seg.png" -> "a.tar/x", ".seg.png"); no '.' there gives
/// an empty suffix. Backslashes count as '/'.
[[nodiscard]] std::pair<std::string, std::string> webdataset_split(std::string_view path);

/// Groups consecutive members with the same key into one WebDatasetSample; members without a
/// suffix are passed over (torchdata keeps them for metadata), a repeated suffix keeps the last
/// member's bytes. Thread-safety: one iterating thread.
class WebDatasetGrouper final : public IterDataPipe<WebDatasetSample> {
 public:
  static constexpr std::string_view kName = "webdataset";

  explicit WebDatasetGrouper(const IterPipe<PathBytes>& members)
      : IterDataPipe<WebDatasetSample>(std::string(kName)), members_(members.ptr()) {}

  void for_each_input(const InputVisitor& visit) override { visit(members_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<WebDatasetGrouper>(*this); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override;
  void load_state(const StateReader& reader) override;

 protected:
  void reset_impl() override;
  std::optional<WebDatasetSample> next_impl() override;

 private:
  Input<PathBytes> members_;
  std::optional<WebDatasetSample> ahead_;  // the start of the next sample, read ahead
};

/// `members | io::webdataset()`.
[[nodiscard]] inline auto webdataset() {
  return PipeAdaptor{[](const IterPipe<PathBytes>& members) { return make_iter<WebDatasetGrouper>(members); }};
}

}  // namespace dpipe::io
