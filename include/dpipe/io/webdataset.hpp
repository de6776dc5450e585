#pragma once
/// \file
/// `io::webdataset(options)` (torchdata's WebDataset): consecutive archive members that share a
/// key become one sample; a sample without a required field is a DataError. Checkpoint state:
/// the member read ahead of the sample last yielded, and the samples skipped in the epoch.

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/fields.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/load_from_archive.hpp>

namespace dpipe::io {
namespace detail {

/// Calls `visit` on each ';'-separated suffix of `suffixes` (".jpg;.png") in turn until it
/// returns true; whether one did.
template <class Visit>
bool any_suffix(std::string_view suffixes, Visit&& visit) {
  for (std::string_view rest = suffixes;;) {
    const auto end = rest.find(';');
    if (visit(rest.substr(0, end))) return true;
    if (end == std::string_view::npos) return false;
    rest.remove_prefix(end + 1);
  }
}

/// Throws KeyError: the sample `key` has none of the fields `suffixes` names; it has `present`.
[[noreturn]] void throw_missing_field(std::string_view key, std::string_view suffixes, std::string_view present);

/// Throws InvalidArgument naming `who` unless each ';'-separated suffix of `suffixes` starts with
/// '.' (".jpg;.png"); `alternatives = false` refuses ';'.
void check_suffixes(std::string_view who, std::string_view suffixes, bool alternatives = true);

}  // namespace detail

/// One WebDataset sample: its key and its fields, each a suffix (".jpg", ".seg.png") with a value
/// of type Value, in archive order. webdataset() yields them with the members' bytes
/// (WebDatasetSample); decode_fields() makes them of other values
/// (<dpipe/io/webdataset_fields.hpp>). Where a suffix is looked up, `suffixes` may list
/// alternatives separated by ';' (".jpg;.png"): the first one the sample has is taken, as
/// webdataset's own lookups do. Thread-safety: a value type.
template <class Value>
struct BasicWebDatasetSample {
  /// torchdata's "__key__": the path of the sample's members up to the first '.' of their file
  /// name, the archive's path included ("shards/a.tar/000017" for the members
  /// "000017.jpg" and "000017.cls" of "shards/a.tar"): it names the shard and the sample in it.
  std::string key;
  /// The fields: each suffix with its value, in archive order.
  std::vector<std::pair<std::string, Value>> fields;

  /// The value of the first field `suffixes` names, or nullptr.
  [[nodiscard]] const Value* find(std::string_view suffixes) const noexcept {
    const Value* found = nullptr;
    detail::any_suffix(suffixes, [&](std::string_view suffix) {
      for (const auto& [name, value] : fields)
        if (name == suffix) found = &value;
      return found != nullptr;
    });
    return found;
  }
  [[nodiscard]] Value* find(std::string_view suffixes) noexcept {
    return const_cast<Value*>(std::as_const(*this).find(suffixes));
  }
  /// The value of the first field `suffixes` names; KeyError naming the key and the suffixes the
  /// sample has ("webdataset: the sample 'a.tar/000' has no field '.txt' (it has .jpg, .cls)").
  [[nodiscard]] const Value& operator[](std::string_view suffixes) const {
    if (const auto* value = find(suffixes)) return *value;
    detail::throw_missing_field(key, suffixes, suffix_list());
  }
  /// The suffixes of the fields, comma-separated (".jpg, .cls").
  [[nodiscard]] std::string suffix_list() const {
    std::string list;
    for (const auto& field : fields) list += (list.empty() ? "" : ", ") + field.first;
    return list;
  }

  friend bool operator==(const BasicWebDatasetSample&, const BasicWebDatasetSample&) = default;
  DPIPE_FIELDS(key, fields)
};

/// A sample as webdataset() yields it: each field holds its member's bytes.
using WebDatasetSample = BasicWebDatasetSample<std::string>;

/// Splits a member path into its WebDataset key and suffix: the suffix starts at the first '.'
/// of the last path component ("a.tar/x.seg.png" -> "a.tar/x", ".seg.png"); no '.' there gives
/// an empty suffix. Backslashes count as '/'.
[[nodiscard]] std::pair<std::string, std::string> webdataset_split(std::string_view path);

struct WebDatasetOptions {
  /// The fields every sample must have: suffixes (".jpg", ".cls"), or alternatives of which one
  /// is enough (".jpg;.png"). A sample without one is a DataError naming its shard (the key's
  /// directory), the sample and the missing suffixes. A shard cut at a member boundary reads as a
  /// whole tar whose last sample lacks fields: this is what tells.
  std::vector<std::string> required_suffixes{};
  /// With OnError::skip, a sample without a required field is logged, counted and dropped.
  OnError on_error = {};
};

/// Groups consecutive members with the same key into one WebDatasetSample; members without a
/// suffix are passed over (torchdata keeps them for metadata), a repeated suffix keeps the last
/// member's bytes. Thread-safety: one iterating thread.
class WebDatasetGrouper final : public IterDataPipe<WebDatasetSample> {
 public:
  static constexpr std::string_view kName = "webdataset";

  /// InvalidArgument when a required suffix does not start with '.'.
  WebDatasetGrouper(const IterPipe<PathBytes>& members, WebDatasetOptions options);

  void for_each_input(const InputVisitor& visit) override { visit(members_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<WebDatasetGrouper>(*this); }
  [[nodiscard]] NodeSettings settings() const override;

  /// The samples without a required field skipped in this epoch.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipper_.skipped(); }

  [[nodiscard]] bool save_state(StateWriter& writer) const override;
  void load_state(const StateReader& reader) override;

 protected:
  void reset_impl() override;
  std::optional<WebDatasetSample> next_impl() override;

 private:
  /// The next sample, complete or not, or std::nullopt at the end of the members.
  std::optional<WebDatasetSample> next_sample();
  /// DataError when `sample` lacks a required field.
  void check_required(const WebDatasetSample& sample) const;

  Input<PathBytes> members_;
  WebDatasetOptions options_;
  dpipe::detail::ElementSkipper skipper_;
  std::optional<WebDatasetSample> ahead_;  // the start of the next sample, read ahead
};

/// `members | io::webdataset()`, `members | io::webdataset({.required_suffixes = {".jpg", ".cls"}})`.
[[nodiscard]] inline auto webdataset(WebDatasetOptions options = {}) {
  return PipeAdaptor{[options = std::move(options)](const IterPipe<PathBytes>& members) {
    return make_iter<WebDatasetGrouper>(members, options);
  }};
}

}  // namespace dpipe::io
