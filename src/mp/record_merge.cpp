// RecordMerge.

#include "record_merge.hpp"

#include <utility>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>

namespace dpipe::detail::mp {
namespace {

/// How many elements a waiting reader asks for before its writer wakes it (see
/// RingWriter::reader_wants_wake): one wake-up for a batch, not one per element.
constexpr std::uint64_t kWakeBatch = 8;

}  // namespace

RecordMerge::RecordMerge(std::vector<MergeInput> inputs, Endpoint endpoint, std::function<std::uint64_t()> generation,
                         std::shared_ptr<const void> owner)
    : owner_(std::move(owner)), endpoint_(endpoint), generation_(std::move(generation)) {
  inputs_.reserve(inputs.size());
  for (auto& link : inputs) {
    const RingReader reader(link.ring);
    inputs_.push_back(Input{std::move(link), reader, {}, false, false});
  }
  live_ = inputs_.size();
}

void RecordMerge::release(Input& input, const RingReader::Record& record) {
  if (input.reader.release(record)) input.link.writer_bell->ring();
}

void RecordMerge::release_held() {
  if (held_ == nullptr) return;
  release(*held_, held_record_);
  held_ = nullptr;
}

RingReader::Record RecordMerge::wait_record(Input& input) {
  drained_ = false;
  if (auto record = input.reader.peek()) return *record;
  std::optional<RingReader::Record> record;
  input.reader.start_waiting(kWakeBatch);
  if (input.link.feeder_bell != nullptr) input.link.feeder_bell->ring();
  try {
    endpoint_.wait(
        [&] {
          record = input.reader.peek();
          return record.has_value();
        },
        [&] {
          return fmt::format(
              "MultiProcessingReadingService: {} sent nothing for {} ms (the timeout); it may be stuck in a user "
              "function",
              input.link.name, endpoint_.timeout.count());
        },
        kReaderFirstSleep);
  } catch (...) {
    input.reader.stop_waiting();
    throw;
  }
  input.reader.stop_waiting();
  return *record;
}

void RecordMerge::assemble(Input& input, RingReader::Record first, std::vector<std::byte>& out) {
  out.assign(first.payload.begin(), first.payload.end());
  bool more = first.more;
  release(input, first);
  while (more) {
    const auto part = wait_record(input);
    out.insert(out.end(), part.payload.begin(), part.payload.end());
    more = part.more;
    release(input, part);
  }
}

bool RecordMerge::skip_out_of_sync(Input& input, const RingReader::Record& record) {
  if (record.kind == RecordKind::kResetAck) {
    const auto generation = from_bytes<std::uint64_t>(record.payload);
    if (!input.synced && generation == expected_) input.synced = true;
    release(input, record);
    return true;
  }
  if (input.synced) return false;
  // A record of an epoch the reader has left: drop it, with its parts.
  bool more = record.more;
  release(input, record);
  while (more) {
    const auto part = wait_record(input);
    more = part.more;
    release(input, part);
  }
  return true;
}

RecordMerge::Piece RecordMerge::take(Input& input) {
  if (!input.stored.empty()) {
    Stored stored = std::move(input.stored.front());
    input.stored.pop_front();
    buffer_ = std::move(stored.bytes);
    return Piece{stored.kind, buffer_, false, {}};
  }
  for (;;) {
    const auto record = wait_record(input);
    if (record.kind == RecordKind::kResetAck && input.synced && from_bytes<std::uint64_t>(record.payload) > expected_) {
      // The writer started an epoch this reader has not been reset for: this stream ends here. The
      // marker stays for the reset that follows.
      return Piece{RecordKind::kEnd, {}, false, {}};
    }
    if (skip_out_of_sync(input, record)) continue;
    if (record.kind == RecordKind::kPaused) {
      release(input, record);
      continue;
    }
    if (record.more) {
      const RecordKind kind = record.kind;
      assemble(input, record, buffer_);
      return Piece{kind, buffer_, false, {}};
    }
    return Piece{record.kind, record.payload, true, record};
  }
}

std::optional<std::span<const std::byte>> RecordMerge::next() {
  release_held();
  if (failure_) throw_failure();
  while (live_ > 0) {
    Input& input = inputs_[cursor_];
    if (input.exhausted) {
      advance();
      continue;
    }
    Piece piece = take(input);
    switch (piece.kind) {
      case RecordKind::kElement:
        if (piece.in_ring) {
          held_ = &input;
          held_record_ = piece.record;
        }
        advance();
        return piece.bytes;
      case RecordKind::kEnd:
        if (piece.in_ring) release(input, piece.record);
        input.exhausted = true;
        --live_;
        advance();
        continue;
      case RecordKind::kError:
        failure_ = from_bytes<ErrorReport>(piece.bytes);
        if (piece.in_ring) release(input, piece.record);
        throw_failure();
      default:
        DPIPE_THROW(Error, "dpipe internal error: unexpected record kind {} from {}", static_cast<int>(piece.kind),
                    input.link.name);
    }
  }
  return std::nullopt;
}

void RecordMerge::throw_failure() const {
  const ErrorReport& report = *failure_;
  throw WorkerError(report.where, report.type, report.message,
                    fmt::format("Caught {} in {}.\nOriginal message: {}", report.type, report.where, report.message));
}

void RecordMerge::reset() {
  release_held();
  expected_ = generation_();
  for (auto& input : inputs_) {
    input.stored.clear();
    input.exhausted = false;
    input.synced = false;
  }
  cursor_ = 0;
  live_ = inputs_.size();
  failure_.reset();
  drained_ = false;
}

void RecordMerge::drain_until_paused(std::uint64_t request) {
  release_held();
  for (auto& input : inputs_) {
    for (;;) {
      const auto record = wait_record(input);
      if (skip_out_of_sync(input, record)) continue;
      if (record.kind == RecordKind::kPaused) {
        const auto marker = from_bytes<std::uint64_t>(record.payload);
        release(input, record);
        if (marker == request) break;
        continue;
      }
      Stored stored{record.kind, {}};
      assemble(input, record, stored.bytes);
      input.stored.push_back(std::move(stored));
    }
  }
  drained_ = true;
}

RecordKind RecordMerge::read_reply(std::size_t input, std::vector<std::byte>& payload) {
  Input& source = inputs_.at(input);
  const auto record = wait_record(source);
  const RecordKind kind = record.kind;
  assemble(source, record, payload);
  drained_ = true;
  return kind;
}

void RecordMerge::save_state(ByteWriter& writer) const {
  if (!drained_ || held_ != nullptr) {
    DPIPE_THROW(StateError,
                "the merge of the worker processes is running: save a checkpoint through DataLoader2::state_dict(), "
                "which pauses the workers first");
  }
  if (failure_) DPIPE_THROW(StateError, "a worker process failed; a failed pipeline cannot be checkpointed");
  writer.write_size(inputs_.size());
  writer.write_size(cursor_);
  for (const auto& input : inputs_) {
    writer.write(input.exhausted);
    writer.write_size(input.stored.size());
    for (const auto& stored : input.stored) {
      writer.write(static_cast<std::uint8_t>(stored.kind));
      writer.write(stored.bytes);
    }
  }
}

void RecordMerge::load_state(ByteReader& reader) {
  const auto count = reader.read<std::uint64_t>();
  if (count != inputs_.size()) {
    DPIPE_THROW(StateError, "the checkpoint merges {} processes, this one {}", count, inputs_.size());
  }
  const auto cursor = reader.read<std::uint64_t>();
  if (cursor >= inputs_.size()) DPIPE_THROW(StateError, "the checkpoint is corrupt: merge position {}", cursor);
  release_held();
  cursor_ = static_cast<std::size_t>(cursor);
  live_ = 0;
  for (auto& input : inputs_) {
    input.exhausted = reader.read<bool>();
    if (!input.exhausted) ++live_;
    input.synced = true;
    input.stored.clear();
    const std::size_t stored = reader.read_count(9);
    for (std::size_t i = 0; i < stored; ++i) {
      const auto kind = reader.read<std::uint8_t>();
      if (kind != static_cast<std::uint8_t>(RecordKind::kElement) &&
          kind != static_cast<std::uint8_t>(RecordKind::kEnd) &&
          kind != static_cast<std::uint8_t>(RecordKind::kError)) {
        DPIPE_THROW(StateError, "the checkpoint is corrupt: a stored record of kind {}", kind);
      }
      input.stored.push_back(Stored{static_cast<RecordKind>(kind), reader.read<std::vector<std::byte>>()});
      if (input.stored.back().kind == RecordKind::kError) (void)from_bytes<ErrorReport>(input.stored.back().bytes);
    }
  }
  expected_ = generation_();
  failure_.reset();
  drained_ = true;
}

void RecordMerge::for_each_restored_element(const std::function<void(std::span<const std::byte>)>& visit) const {
  for (const auto& input : inputs_) {
    for (const auto& stored : input.stored) {
      if (stored.kind == RecordKind::kElement) visit(stored.bytes);
    }
  }
}

}  // namespace dpipe::detail::mp
