#pragma once
/// \file
/// HoldBackSource: a decompressor's bytes held back until their integrity check passes, so that
/// no reader downstream sees bytes a corrupt stream produced. Private to src/io.

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <string_view>
#include <vector>

#include <dpipe/io/byte_source.hpp>

namespace dpipe::io::detail {

/// A decompressor that tells how many of its bytes have passed their integrity check (a gzip
/// member's trailer). The bytes up to its end have passed every check once read() returns 0.
/// Thread-safety: one thread at a time.
class CheckedSource : public ByteSource {
 public:
  /// How many of the bytes read() returned so far passed their check before the end.
  [[nodiscard]] virtual std::uint64_t checked() const noexcept = 0;
  /// What one checked unit is called in messages: "member", "stream".
  [[nodiscard]] virtual std::string_view unit() const noexcept = 0;
};

/// The bytes of a CheckedSource, each passed on once its check passed, holding back at most
/// `hold_back` bytes: when that many are waiting, they are passed on unchecked. A failure of the
/// source after that says how many bytes of its unit went unchecked, and from which offset.
/// `hold_back` 0 passes every byte on as it comes. Thread-safety: one thread at a time.
class HoldBackSource final : public ByteSource {
 public:
  HoldBackSource(std::unique_ptr<CheckedSource> inner, std::uint64_t hold_back);

  std::size_t read(char* data, std::size_t size) override;

 private:
  /// A block of bytes read from the source.
  struct Chunk {
    std::unique_ptr<char[]> bytes;
    std::size_t size = 0;
  };

  /// Reads one block of the source behind the held bytes; false at its end.
  bool fill();
  /// Reads the source; its failure names the bytes passed on unchecked, if any.
  std::size_t read_source(char* data, std::size_t size);

  std::unique_ptr<CheckedSource> inner_;
  std::uint64_t hold_back_;
  // Fixed-size chunks, not one growing buffer: a long member costs no copies while it grows, and
  // the chunks passed on are reused for the next bytes.
  std::deque<Chunk> chunks_;                    // bytes read from the source, from begin_ in the first
  std::vector<std::unique_ptr<char[]>> spare_;  // chunks passed on, for reuse
  std::size_t begin_ = 0;
  std::uint64_t held_ = 0;       // bytes in chunks_ not passed on
  std::uint64_t passed_on_ = 0;  // bytes read() returned
  bool ended_ = false;           // the source ended: every held byte is checked
};

}  // namespace dpipe::io::detail
