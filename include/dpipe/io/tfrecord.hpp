#pragma once
/// \file
/// TFRecord files: `io::tfrecord_records(options)` yields each record's bytes,
/// `io::load_from_tfrecord(options)` (torchdata's TFRecordLoader) decodes each record as a
/// `tf.train.Example` into an `io::TFExample`. Both check the framing's CRC32C checksums.
/// Checkpoint state: the file being read, the byte offset of its next record and its record
/// count; a restore reopens that one file there and reads nothing before it.

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/io/detail/record_cursor.hpp>
#include <dpipe/io/file_reader.hpp>
#include <dpipe/io/opened_file.hpp>

namespace dpipe::io {

/// A `tf.train.BytesList`: byte strings.
using BytesList = std::vector<std::string>;
/// A `tf.train.FloatList`.
using FloatList = std::vector<float>;
/// A `tf.train.Int64List`.
using Int64List = std::vector<std::int64_t>;

/// A `tf.train.Feature`: one of the three lists (std::get<io::FloatList>(feature), or
/// std::visit). A Feature with no list set decodes as an empty BytesList.
using Feature = std::variant<BytesList, FloatList, Int64List>;

/// A `tf.train.Example`: its features by name. A value with a Serializer (std::map, std::variant,
/// std::vector), so it crosses from worker processes.
using TFExample = std::map<std::string, Feature>;

struct TFRecordOptions {
  /// Check the masked CRC32C of each record's length and data (a mismatch is a DataError).
  bool verify_crc = true;
  /// A record whose length field says more is a DataError, before anything is allocated: a
  /// corrupt length does not fill the memory. The rest of its file is skipped.
  std::uint64_t max_record_bytes = std::uint64_t{256} << 20;
  /// With skip: a record whose data CRC does not match, or that is not an Example, is skipped (the
  /// next record is read); a truncated record, a length whose CRC does not match or that is too
  /// large, and a read error skip the rest of their file.
  OnError on_error = {};
};

namespace detail {

/// Decodes the protobuf-encoded `tf.train.Example` in `bytes` into `example` (emptied first).
/// Returns std::nullopt, or what is wrong with the bytes ("field 1 ... runs past the end").
/// Unknown fields are skipped. Thread-safe.
[[nodiscard]] std::optional<std::string> decode_example(std::string_view bytes, TFExample& example);

}  // namespace detail

/// Yields the records of each file its source opens, file after file: their bytes (Out =
/// std::string, `tfrecord_records`) or their Examples (Out = TFExample, `load_from_tfrecord`).
/// Errors name the file, the record's byte offset and its number in the file (from 1).
/// Thread-safety: one iterating thread.
template <class Out>
class TFRecordReader final : public FileReader<Out, detail::RecordCursor> {
  static_assert(std::is_same_v<Out, std::string> || std::is_same_v<Out, TFExample>);
  using Base = FileReader<Out, detail::RecordCursor>;

 public:
  static constexpr std::string_view kRecordsName = "tfrecord_records";
  static constexpr std::string_view kExamplesName = "load_from_tfrecord";
  static constexpr std::string_view kName = std::is_same_v<Out, TFExample> ? kExamplesName : kRecordsName;

  TFRecordReader(const IterPipe<OpenedFile>& files, TFRecordOptions options)
      : Base(kName, files, detail::RecordCursor({options.verify_crc, options.max_record_bytes}), options.on_error),
        options_(options) {
    if (options.max_record_bytes == 0) DPIPE_THROW(InvalidArgument, "{}: max_record_bytes must be > 0", kName);
  }

  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<TFRecordReader>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    return {{"verify_crc", options_.verify_crc ? "true" : "false"},
            {"max_record_bytes", std::to_string(options_.max_record_bytes)}};
  }

 protected:
  std::optional<Out> read_next() override {
    std::string_view record;
    if constexpr (std::is_same_v<Out, std::string>) {
      std::string bytes;
      if (!this->cursor_.next(record, &bytes, this->label())) return std::nullopt;
      return bytes;
    } else {
      if (!this->cursor_.next(record, nullptr, this->label())) return std::nullopt;
      TFExample example;
      if (auto problem = detail::decode_example(record, example))
        throw this->cursor_.record_error("not a tf.train.Example: " + *problem, this->label());
      return example;
    }
  }

 private:
  TFRecordOptions options_;
};

/// `files | io::tfrecord_records(options)`: each record's bytes (for your own protobufs).
[[nodiscard]] inline auto tfrecord_records(TFRecordOptions options = {}) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<TFRecordReader<std::string>>(files, options); }};
}

/// `files | io::load_from_tfrecord(options)`: each record decoded as a `tf.train.Example`.
/// torchdata's `spec` argument and SequenceExample are not supported.
[[nodiscard]] inline auto load_from_tfrecord(TFRecordOptions options = {}) {
  return PipeAdaptor{
      [=](const IterPipe<OpenedFile>& files) { return make_iter<TFRecordReader<TFExample>>(files, options); }};
}

}  // namespace dpipe::io
