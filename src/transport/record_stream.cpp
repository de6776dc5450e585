// RecordStream.

#include "record_stream.hpp"

#include <utility>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/logging.hpp>

#include "transport/error_report.hpp"

namespace dpipe::detail::transport {

std::vector<std::byte> marker_payload(std::uint64_t value) { return to_bytes(value); }

std::uint64_t marker_value(std::span<const std::byte> payload) { return from_bytes<std::uint64_t>(payload); }
namespace {

/// How many elements a waiting reader asks for before its writer wakes it (see
/// RingWriter::reader_wants_wake): one wake-up for a batch, not one per element.
constexpr std::uint64_t kWakeBatch = 8;

}  // namespace

void RecordStream::release(const RingReader::Record& record) {
  if (reader_.release(record)) link_.writer_bell->ring();
}

void RecordStream::release_piece(const Piece& piece) {
  if (piece.in_ring) release(piece.record);
}

RingReader::Record RecordStream::wait_record(const Endpoint& endpoint) {
  if (auto record = reader_.peek()) return *record;
  std::optional<RingReader::Record> record;
  reader_.start_waiting(kWakeBatch);
  if (link_.feeder_bell != nullptr) link_.feeder_bell->ring();
  try {
    const auto describe = [&](std::chrono::nanoseconds waited, bool timed_out) {
      if (link_.describe_stall) return link_.describe_stall(waited, timed_out);
      return fmt::format("MultiProcessingReadingService: {} sent nothing for {}{}", link_.name,
                         describe_duration(waited), timed_out ? " (the timeout)" : "");
    };
    endpoint.wait(
        [&] {
          record = reader_.peek();
          return record.has_value();
        },
        [&] { return describe(endpoint.timeout, true); }, link_.reader_waits, kReaderFirstSleep,
        [&](std::chrono::nanoseconds waited) {
          log_warning("{}; still waiting (MultiProcessingOptions::timeout turns this into a TimeoutError)",
                      describe(waited, false));
        });
  } catch (...) {
    reader_.stop_waiting();
    throw;
  }
  reader_.stop_waiting();
  return *record;
}

void RecordStream::assemble(const Endpoint& endpoint, RingReader::Record first, std::vector<std::byte>& out,
                            bool hold) {
  out.assign(first.payload.begin(), first.payload.end());
  auto part = first;
  while (part.more) {
    release(part);
    part = wait_record(endpoint);
    out.insert(out.end(), part.payload.begin(), part.payload.end());
  }
  // Held before released: the writer never sees the element leave its count in between.
  if (hold && part.kind == RecordKind::kElement) reader_.hold(out.size());
  release(part);
}

void RecordStream::let_go(const Stored& stored) noexcept {
  if (stored.kind != RecordKind::kElement || !link_.count_stored) return;
  if (reader_.let_go(stored.bytes.size())) link_.writer_bell->ring();
}

bool RecordStream::skip_out_of_sync(const Endpoint& endpoint, std::uint64_t generation,
                                    const RingReader::Record& record) {
  if (record.kind == RecordKind::kResetAck) {
    if (!synced_ && marker_value(record.payload) == generation) synced_ = true;
    release(record);
    return true;
  }
  if (synced_) return false;
  // A record of an epoch the reader has left: drop it, with its parts.
  if (record.more && link_.arena_elements != nullptr && record.kind == RecordKind::kElement) {
    std::vector<std::byte> joined;  // its references must be decoded to be given back
    assemble(endpoint, record, joined);
    discard(RecordKind::kElement, joined);
    return true;
  }
  bool more = record.more;
  if (!more) discard(record.kind, record.payload);
  release(record);
  while (more) {
    const auto part = wait_record(endpoint);
    more = part.more;
    release(part);
  }
  return true;
}

RecordStream::Piece RecordStream::take(const Endpoint& endpoint, std::uint64_t generation,
                                       std::vector<std::byte>& buffer) {
  if (!stored_.empty()) {
    Stored stored = std::move(stored_.front());
    stored_.pop_front();
    let_go(stored);
    buffer = std::move(stored.bytes);
    return Piece{stored.kind, buffer, false, {}};
  }
  for (;;) {
    const auto record = wait_record(endpoint);
    if (record.kind == RecordKind::kResetAck && synced_ && marker_value(record.payload) > generation) {
      return Piece{RecordKind::kEnd, {}, false, {}};  // the marker stays for the reset that follows
    }
    if (skip_out_of_sync(endpoint, generation, record)) continue;
    if (record.kind == RecordKind::kPaused) {
      release(record);
      continue;
    }
    if (record.more) {
      const RecordKind kind = record.kind;
      assemble(endpoint, record, buffer);
      return Piece{kind, buffer, false, {}};
    }
    return Piece{record.kind, record.payload, true, record};
  }
}

void RecordStream::drain_until_paused(const Endpoint& endpoint, std::uint64_t generation, std::uint64_t request) {
  for (;;) {
    const auto record = wait_record(endpoint);
    if (skip_out_of_sync(endpoint, generation, record)) continue;
    if (record.kind == RecordKind::kPaused) {
      const auto marker = marker_value(record.payload);
      release(record);
      if (marker == request) return;
      continue;
    }
    Stored stored{record.kind, {}};
    assemble(endpoint, record, stored.bytes, link_.count_stored);
    const std::size_t held = stored.bytes.size();
    store_plain(stored);
    if (link_.count_stored && stored.kind == RecordKind::kElement && stored.bytes.size() != held) {
      // Counted at its new size before the old one goes, so the count never drops in between.
      reader_.hold(stored.bytes.size());
      if (reader_.let_go(held)) link_.writer_bell->ring();
    }
    stored_.push_back(std::move(stored));
  }
}

RecordKind RecordStream::read_reply(const Endpoint& endpoint, std::vector<std::byte>& payload) {
  const auto record = wait_record(endpoint);
  const RecordKind kind = record.kind;
  assemble(endpoint, record, payload);
  return kind;
}

void RecordStream::discard(RecordKind kind, std::span<const std::byte> payload) const noexcept {
  if (kind != RecordKind::kElement) return;
  if (link_.handoff != nullptr) {
    link_.handoff->discard(payload);
    return;
  }
  if (link_.arena_elements == nullptr) return;
  try {
    // Decoding adopts the blocks the element refers to; dropping it gives them back.
    link_.arena_elements->discard(link_.arena_elements->adopt(payload));
  } catch (...) {
    // An element that does not decode refers to no block this reader could give back.
  }
}

void RecordStream::store_plain(Stored& stored) const {
  if (stored.kind != RecordKind::kElement || link_.arena_elements == nullptr) return;
  const auto handle = link_.arena_elements->adopt(stored.bytes);
  try {
    stored.bytes = link_.arena_elements->encode(handle);
  } catch (...) {
    link_.arena_elements->discard(handle);
    throw;
  }
  link_.arena_elements->discard(handle);
}

void RecordStream::reset() noexcept {
  for (const auto& stored : stored_) {
    // Stored elements hold plain bytes (store_plain()): only handles need discarding.
    if (link_.handoff != nullptr) discard(stored.kind, stored.bytes);
    let_go(stored);
  }
  stored_.clear();
  synced_ = false;
}

void RecordStream::discard_remaining() noexcept {
  if (link_.handoff == nullptr) return;
  reset();
  while (const auto record = reader_.peek()) {
    if (!record->more) discard(record->kind, record->payload);
    (void)reader_.release(*record);
  }
}

void RecordStream::adopt_elements(const std::string& scope, std::vector<Stored>& records) const {
  std::size_t adopted = 0;
  try {
    for (; adopted < records.size(); ++adopted) {
      Stored& record = records[adopted];
      if (record.kind == RecordKind::kElement) record.bytes = link_.handoff->adopt(record.bytes);
    }
  } catch (const SerializationError& error) {
    for (std::size_t i = 0; i < adopted; ++i) discard(records[i].kind, records[i].bytes);
    DPIPE_THROW(StateError, "{}: the checkpoint holds an element that does not decode ({})", scope, error.what());
  } catch (...) {
    for (std::size_t i = 0; i < adopted; ++i) discard(records[i].kind, records[i].bytes);
    throw;
  }
}

void RecordStream::save_state(StateWriter& writer) const {
  std::vector<Stored> stored(stored_.begin(), stored_.end());
  if (link_.handoff != nullptr) {
    for (auto& record : stored) {
      if (record.kind == RecordKind::kElement) record.bytes = link_.handoff->encode(record.bytes);
    }
  }
  writer.write("stored", stored);
}

void RecordStream::load_state(const StateReader& reader) {
  auto stored = reader.read<std::vector<Stored>>("stored");
  for (auto& record : stored) {
    if (record.kind != RecordKind::kElement && record.kind != RecordKind::kEnd && record.kind != RecordKind::kError) {
      DPIPE_THROW(StateError, "the checkpoint's field {}:stored holds a record of kind {}", reader.name(),
                  static_cast<int>(record.kind));
    }
    if (record.kind == RecordKind::kError) {
      try {
        (void)from_bytes<ErrorReport>(record.bytes);
      } catch (const SerializationError& error) {
        DPIPE_THROW(StateError, "the checkpoint's field {}:stored holds a corrupt error report: {}", reader.name(),
                    error.what());
      }
    }
  }
  if (link_.handoff != nullptr) adopt_elements(reader.name(), stored);
  reset();
  stored_.assign(std::make_move_iterator(stored.begin()), std::make_move_iterator(stored.end()));
  for (const auto& record : stored_) {
    if (record.kind == RecordKind::kElement && link_.count_stored) reader_.hold(record.bytes.size());
  }
  synced_ = true;
}

}  // namespace dpipe::detail::transport
