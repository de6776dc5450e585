// The element transport (src/transport/), driven by threads instead of processes so that
// ThreadSanitizer can watch it: rings, blocking writes and reads, records in parts, the cyclic
// merge and its order, errors, reset markers, drained checkpoints, and the two ways elements pass.

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/core/error.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/dpipe.hpp>

#include "reading_service/multiprocessing/plan.hpp"
#include "support/battery.hpp"
#include "transport/child_protocol.hpp"
#include "transport/crew.hpp"
#include "transport/element_passing.hpp"
#include "transport/error_report.hpp"
#include "transport/record_merge.hpp"
#include "transport/record_stream.hpp"
#include "transport/ring_sink.hpp"
#include "transport/shared_pool.hpp"

namespace {

using dpipe::detail::transport::Bell;
using dpipe::detail::transport::Endpoint;
using dpipe::detail::transport::ErrorReport;
using dpipe::detail::transport::Liveness;
using dpipe::detail::transport::marker_payload;
using dpipe::detail::transport::RecordKind;
using dpipe::detail::transport::RecordStream;
using Merge = dpipe::detail::transport::RecordMerge<dpipe::detail::transport::CyclicOrder>;
using dpipe::detail::transport::RingHeader;
using dpipe::detail::transport::RingMemory;
using dpipe::detail::transport::RingSink;
using dpipe::detail::transport::StreamLink;

/// Threads never die here.
struct AlwaysAlive final : Liveness {
  void check(bool /*thorough*/) override {}
};

/// A ring in ordinary memory, shared by threads.
struct TestRing {
  explicit TestRing(std::size_t capacity) : data(capacity) {}
  RingMemory memory() { return RingMemory{&header, data.data(), data.size()}; }
  RingHeader header;
  std::vector<std::byte> data;
};

/// A blocking sink and a reader on one 4 KiB ring, used from the test's thread.
struct SinkAndReader {
  TestRing ring{4096};
  Bell reader_bell;
  Bell writer_bell;
  AlwaysAlive alive;
  RingSink sink{ring.memory(), Endpoint{&writer_bell, &alive, std::chrono::milliseconds(0)}, &reader_bell, "reader"};
  dpipe::detail::transport::RingReader reader{ring.memory()};
};

/// A producer thread: `write` runs with a sink into `ring`, waking `reader`.
class Producer {
 public:
  Producer(TestRing& ring, Bell& reader, std::function<void(RingSink&)> write)
      : sink_(ring.memory(), Endpoint{&bell_, &alive_, std::chrono::milliseconds(0)}, &reader, "the test reader"),
        thread_([this, write = std::move(write)] { write(sink_); }) {}
  ~Producer() { thread_.join(); }
  Producer(const Producer&) = delete;
  Producer& operator=(const Producer&) = delete;
  Bell& bell() { return bell_; }

 private:
  Bell bell_;
  AlwaysAlive alive_;
  RingSink sink_;
  std::thread thread_;
};

std::vector<std::byte> pattern(std::size_t size, std::size_t seed) {
  std::vector<std::byte> bytes(size);
  for (std::size_t i = 0; i < size; ++i) bytes[i] = static_cast<std::byte>((i * 31 + seed * 7) & 0xFF);
  return bytes;
}

void write_element(RingSink& sink, const std::vector<std::byte>& bytes) {
  sink.begin().write_bytes(bytes.data(), bytes.size());
  sink.end();
}

void write_int(RingSink& sink, std::int64_t value) {
  sink.begin().write(value);
  sink.end();
}

std::int64_t as_int(std::span<const std::byte> bytes) { return dpipe::from_bytes<std::int64_t>(bytes); }

TEST_CASE("transport: a small ring carries elements of every size in order / long ones in parts", "[mp][concurrency]") {
  TestRing ring(4096);  // records of up to 2 KiB: longer elements travel in parts
  Bell reader_bell;
  constexpr std::size_t kCount = 600;
  const auto size_of = [](std::size_t i) { return (i * 37) % 9000; };
  auto producer = std::make_unique<Producer>(ring, reader_bell, [&](RingSink& sink) {
    sink.write_record(RecordKind::kResetAck, marker_payload(1));
    for (std::size_t i = 0; i < kCount; ++i) write_element(sink, pattern(size_of(i), i));
    sink.write_record(RecordKind::kEnd, {});
  });
  std::vector<StreamLink> inputs{StreamLink{ring.memory(), &producer->bell(), nullptr, "producer"}};
  AlwaysAlive alive;
  Merge merge(std::move(inputs), Endpoint{&reader_bell, &alive, std::chrono::milliseconds(0)},
              [] { return std::uint64_t{1}; });
  merge.reset();
  std::size_t received = 0;
  while (auto bytes = merge.next()) {
    const auto expected = pattern(size_of(received), received);
    REQUIRE(bytes->size() == expected.size());
    CHECK(std::equal(bytes->begin(), bytes->end(), expected.begin()));
    ++received;
  }
  CHECK(received == kCount);
  producer.reset();
}

TEST_CASE("transport: a writer about to wait wakes a reader that asked for more elements than it got",
          "[mp][concurrency]") {
  // The reader sleeps until 8 elements are there; a writer that publishes 1 and then waits (its
  // budget is full, or it blocks on the ring) must not leave the reader asleep.
  SinkAndReader channel;
  auto& sink = channel.sink;
  auto& reader = channel.reader;
  auto& reader_bell = channel.reader_bell;
  reader.start_waiting(8);
  const auto asleep = reader_bell.prepare();
  write_int(sink, 7);
  CHECK(reader_bell.prepare() == asleep);  // one element: not yet worth a wake-up
  sink.flush();
  CHECK(reader_bell.prepare() == asleep);  // nor after a burst: the reader's batching decides
  sink.wake_reader_before_waiting();
  CHECK(reader_bell.prepare() != asleep);  // the writer is about to wait: the reader is woken
  const auto woken = reader_bell.prepare();
  sink.wake_reader_before_waiting();
  CHECK(reader_bell.prepare() == woken);  // nothing new: no further wake-up
  const auto record = reader.peek();
  REQUIRE(record);
  CHECK(as_int(record->payload) == 7);
}

TEST_CASE("transport: a writer's reader batch replaces what a starving reader asked for", "[mp][concurrency]") {
  // A worker with small elements lets the main process sleep through a longer run than the reader
  // asks for, and one near its prefetch counts wakes it after fewer.
  TestRing ring(4096);
  dpipe::detail::transport::RingWriter writer(ring.memory());
  dpipe::detail::transport::RingReader reader(ring.memory());
  const std::vector<std::byte> payload(8);
  const auto write_one = [&] { REQUIRE(writer.try_write(RecordKind::kElement, payload)); };
  write_one();  // released below, so that the reader's count starts above zero
  const auto record = reader.peek();
  REQUIRE(record);
  (void)reader.release(*record);

  reader.start_waiting(2);
  writer.set_reader_batch(3);
  write_one();
  write_one();
  CHECK_FALSE(writer.reader_wants_wake());  // 2 written: what the reader asked for, but the writer says 3
  write_one();
  CHECK(writer.reader_wants_wake());  // 3 since the reader started waiting

  writer.set_reader_batch(0);  // back to the reader's ask, counted from where it started
  CHECK(writer.reader_wants_wake());
  reader.stop_waiting();
  CHECK_FALSE(writer.reader_wants_wake());  // a reader that does not sleep is never rung
}

TEST_CASE("transport: a worker thread's sink counts what its elements in flight hold", "[mp]") {
  // A worker thread's ring holds handles; the allowance for small elements counts what each
  // element holds (its end_handle() estimate) until the reader releases it, oldest first.
  SinkAndReader channel;
  auto& sink = channel.sink;
  auto& reader = channel.reader;
  const auto write_handle = [&](std::int64_t handle, std::uint64_t held) {
    sink.begin().write(handle);
    sink.end_handle(held);
  };
  write_handle(1, 1000);  // not counted: counting starts with count_held_bytes()
  CHECK_FALSE(sink.counts_held_bytes());
  CHECK(sink.bytes_in_flight() == channel.sink.writer().bytes_in_flight());  // its records until then
  sink.count_held_bytes();
  CHECK(sink.counts_held_bytes());
  write_handle(2, 10);
  write_handle(3, 20);
  write_handle(4, 30);
  sink.flush();
  CHECK(sink.bytes_in_flight() == 60);
  const auto release_next = [&](std::int64_t expected_handle) {
    const auto record = reader.peek();
    REQUIRE(record);
    CHECK(as_int(record->payload) == expected_handle);
    (void)reader.release(*record);
  };
  release_next(1);
  CHECK(sink.bytes_in_flight() == 60);  // the uncounted element went first
  release_next(2);
  CHECK(sink.bytes_in_flight() == 50);
  release_next(3);
  release_next(4);
  CHECK(sink.bytes_in_flight() == 0);
  write_handle(5, 7);
  CHECK(sink.bytes_in_flight() == 7);
}

TEST_CASE("transport: a waiting writer is woken when what it waits for is there / not on every release",
          "[mp][concurrency]") {
  TestRing ring(4096);
  dpipe::detail::transport::RingWriter writer(ring.memory());
  dpipe::detail::transport::RingReader reader(ring.memory());
  const std::vector<std::byte> payload(800);  // records of 808 bytes
  for (int i = 0; i < 4; ++i) REQUIRE(writer.try_write(RecordKind::kElement, payload));
  const auto release_next = [&] {
    const auto record = reader.peek();
    REQUIRE(record);
    return reader.release(*record);
  };
  // Room for 1200 bytes (twice that free, for a padding run): after two releases, not one.
  writer.request_wake_for_room(1200);
  CHECK_FALSE(release_next());
  CHECK(release_next());
  writer.clear_wake();
  for (int i = 0; i < 2; ++i) REQUIRE(writer.try_write(RecordKind::kElement, payload));
  // At most 2 of the 4 elements in flight: after the second release, not the first.
  writer.request_wake_for_elements(2);
  CHECK_FALSE(release_next());
  CHECK(release_next());
  writer.clear_wake();
  CHECK_FALSE(release_next());

  // At most 1 element or at most 1616 bytes (two records) in flight: the bytes come first.
  TestRing fresh(4096);
  dpipe::detail::transport::RingWriter bytes_writer(fresh.memory());
  dpipe::detail::transport::RingReader bytes_reader(fresh.memory());
  for (int i = 0; i < 4; ++i) REQUIRE(bytes_writer.try_write(RecordKind::kElement, payload));
  CHECK(bytes_writer.bytes_in_flight() == 4 * 808);
  const auto release_bytes = [&] {
    const auto record = bytes_reader.peek();
    REQUIRE(record);
    return bytes_reader.release(*record);
  };
  bytes_writer.request_wake_for_elements(1, 2 * 808);
  CHECK_FALSE(release_bytes());
  CHECK(release_bytes());
  CHECK(bytes_writer.bytes_in_flight() == 2 * 808);
  bytes_writer.clear_wake();
  CHECK_FALSE(release_bytes());
}

TEST_CASE("transport: elements a drained stream stores count against its writer until taken / restored ones too",
          "[mp]") {
  TestRing ring(4096);
  dpipe::detail::transport::RingWriter writer(ring.memory());
  Bell writer_bell;
  Bell reader_bell;
  AlwaysAlive alive;
  const Endpoint endpoint{&reader_bell, &alive, std::chrono::milliseconds(0)};
  RecordStream stream(StreamLink{ring.memory(), &writer_bell, nullptr, "the writer"});
  const std::vector<std::byte> payload(20);  // records of 32 bytes
  REQUIRE(writer.try_write(RecordKind::kResetAck, marker_payload(1)));
  for (int i = 0; i < 3; ++i) REQUIRE(writer.try_write(RecordKind::kElement, payload));
  REQUIRE(writer.try_write(RecordKind::kPaused, marker_payload(9)));
  stream.drain_until_paused(endpoint, 1, 9);
  CHECK(writer.drained());  // the ring is empty, but the stream holds the 3 elements
  CHECK(writer.elements_in_flight() == 3);
  CHECK(writer.bytes_in_flight() == 3 * 32);
  REQUIRE(writer.try_write(RecordKind::kElement, payload));
  CHECK(writer.elements_in_flight() == 4);
  CHECK(writer.bytes_in_flight() == 4 * 32);

  dpipe::StateStore state;
  dpipe::StateWriter state_writer(state, "stream");
  stream.save_state(state_writer);
  std::vector<std::byte> buffer;
  CHECK(stream.take(endpoint, 1, buffer).kind == RecordKind::kElement);  // a stored one
  CHECK(writer.elements_in_flight() == 3);
  CHECK(writer.bytes_in_flight() == 3 * 32);
  stream.reset();  // a new epoch drops what is stored
  CHECK(writer.elements_in_flight() == 1);
  CHECK(writer.bytes_in_flight() == 32);

  // Restored into a fresh ring, the 3 stored elements count before the writer wrote any.
  TestRing fresh(4096);
  dpipe::detail::transport::RingWriter fresh_writer(fresh.memory());
  RecordStream restored(StreamLink{fresh.memory(), &writer_bell, nullptr, "the writer"});
  restored.load_state(dpipe::StateReader(state, "stream"));
  CHECK(fresh_writer.elements_in_flight() == 3);
  CHECK(fresh_writer.bytes_in_flight() == 3 * 32);
  CHECK(restored.take(endpoint, 1, buffer).kind == RecordKind::kElement);
  CHECK(fresh_writer.elements_in_flight() == 2);
}

TEST_CASE("transport: a writer waiting for its budget is woken when the reader lets go of held elements", "[mp]") {
  TestRing ring(4096);
  dpipe::detail::transport::RingWriter writer(ring.memory());
  dpipe::detail::transport::RingReader reader(ring.memory());
  const std::vector<std::byte> payload(20);  // records of 32 bytes
  for (int i = 0; i < 4; ++i) REQUIRE(writer.try_write(RecordKind::kElement, payload));
  // At most 2 elements or 64 bytes in flight; the reader holds what it releases.
  writer.request_wake_for_elements(2, 64);
  for (int i = 0; i < 4; ++i) {
    const auto record = reader.peek();
    REQUIRE(record);
    reader.hold(record->payload.size());
    CHECK_FALSE(reader.release(*record));
  }
  CHECK(writer.elements_in_flight() == 4);
  CHECK_FALSE(reader.let_go(20));
  CHECK(reader.let_go(20));  // 2 in flight
  writer.request_wake_for_elements(0);
  CHECK_FALSE(reader.let_go(20));
  CHECK(reader.let_go(20));
  CHECK(writer.elements_in_flight() == 0);

  // Held without having been written (restored from a checkpoint into a fresh ring).
  TestRing fresh(4096);
  dpipe::detail::transport::RingWriter fresh_writer(fresh.memory());
  dpipe::detail::transport::RingReader fresh_reader(fresh.memory());
  fresh_reader.hold(20);
  fresh_reader.hold(20);
  CHECK(fresh_writer.elements_in_flight() == 2);
  CHECK(fresh_writer.bytes_in_flight() == 2 * 32);
  fresh_writer.request_wake_for_elements(0, 0);
  CHECK_FALSE(fresh_reader.let_go(20));
  CHECK(fresh_reader.let_go(20));
}

/// Counts liveness checks, and the thorough ones (at most one per liveness period of waiting).
struct CountingLiveness final : Liveness {
  void check(bool thorough) override {
    ++checks;
    thorough_checks += thorough ? 1 : 0;
  }
  int checks = 0;
  int thorough_checks = 0;
};

TEST_CASE("transport: a reader's first sleep is short / so an element published without a wake-up is not held",
          "[mp][concurrency]") {
  // Nobody rings the bell: the first sleep ends after `first_sleep`, long before a liveness period.
  Bell bell;
  CountingLiveness liveness;
  const Endpoint endpoint{&bell, &liveness, std::chrono::milliseconds(0)};
  int polls = 0;
  endpoint.wait([&] { return ++polls == 3; }, [] { return std::string(); },
                dpipe::detail::transport::Activity::kWaitingForRoom, std::chrono::microseconds(200));
  CHECK(polls == 3);  // before and after announcing the sleep, then once after it
  CHECK(liveness.checks == 1);
  CHECK(liveness.thorough_checks == 0);  // woken by the first sleep's end, not by the liveness period
}

TEST_CASE("transport: the merge takes the writers in turn and skips those that ended", "[mp][concurrency]") {
  struct Case {
    std::vector<std::size_t> sizes;
    std::vector<std::int64_t> expected;  // writer w sends 100 * w + 0, 1, ...
  };
  const std::vector<Case> cases = {
      {{4, 1}, {0, 100, 1, 2, 3}},
      {{0, 5}, {100, 101, 102, 103, 104}},
      {{7, 2, 0}, {0, 100, 1, 101, 2, 3, 4, 5, 6}},
      {{1, 3, 2}, {0, 100, 200, 101, 201, 102}},
  };
  for (const auto& c : cases) {
    INFO("sizes " << ::Catch::Detail::stringify(c.sizes));
    std::vector<std::unique_ptr<TestRing>> rings;
    Bell reader_bell;
    std::vector<std::unique_ptr<Producer>> producers;
    for (std::size_t w = 0; w < c.sizes.size(); ++w) {
      rings.push_back(std::make_unique<TestRing>(4096));
      producers.push_back(std::make_unique<Producer>(*rings.back(), reader_bell, [w, n = c.sizes[w]](RingSink& sink) {
        sink.write_record(RecordKind::kResetAck, marker_payload(1));
        for (std::size_t i = 0; i < n; ++i) write_int(sink, static_cast<std::int64_t>(100 * w + i));
        sink.write_record(RecordKind::kEnd, {});
      }));
    }
    std::vector<StreamLink> inputs;
    for (std::size_t w = 0; w < rings.size(); ++w) {
      inputs.push_back(StreamLink{rings[w]->memory(), &producers[w]->bell(), nullptr, "writer " + std::to_string(w)});
    }
    AlwaysAlive alive;
    Merge merge(std::move(inputs), Endpoint{&reader_bell, &alive, std::chrono::milliseconds(0)},
                [] { return std::uint64_t{1}; });
    merge.reset();
    std::vector<std::int64_t> got;
    while (auto bytes = merge.next()) got.push_back(as_int(*bytes));
    CHECK(got == c.expected);
    producers.clear();
  }
}

TEST_CASE("transport: records of an older epoch are dropped / an error follows what precedes it", "[mp][concurrency]") {
  TestRing first(4096);
  TestRing second(4096);
  Bell reader_bell;
  Producer stale(first, reader_bell, [](RingSink& sink) {
    for (int i = 0; i < 50; ++i) write_int(sink, -1);  // before the reset: dropped
    sink.write_record(RecordKind::kResetAck, marker_payload(0));
    write_int(sink, -2);  // still the old epoch
    sink.write_record(RecordKind::kResetAck, marker_payload(1));
    for (int i = 0; i < 5; ++i) write_int(sink, i);
    sink.write_record(RecordKind::kPaused, marker_payload(3));  // markers are skipped
    sink.write_record(RecordKind::kEnd, {});
  });
  Producer failing(second, reader_bell, [](RingSink& sink) {
    sink.write_record(RecordKind::kResetAck, marker_payload(1));
    write_int(sink, 10);
    write_int(sink, 11);
    sink.write_record(RecordKind::kError, dpipe::to_bytes(ErrorReport{"worker process 1", "std::out_of_range",
                                                                      "index 7", "", std::nullopt}));
  });
  AlwaysAlive alive;
  Merge merge({StreamLink{first.memory(), &stale.bell(), nullptr, "worker process 0"},
               StreamLink{second.memory(), &failing.bell(), nullptr, "worker process 1"}},
              Endpoint{&reader_bell, &alive, std::chrono::milliseconds(0)}, [] { return std::uint64_t{1}; });
  merge.reset();
  std::vector<std::int64_t> got;
  try {
    while (auto bytes = merge.next()) got.push_back(as_int(*bytes));
    FAIL("no error");
  } catch (const dpipe::WorkerError& error) {
    CHECK(std::string(error.what()) == "Caught std::out_of_range in worker process 1.\nOriginal message: index 7");
  }
  CHECK(got == std::vector<std::int64_t>{0, 10, 1, 11, 2});
  CHECK_THROWS_AS(merge.next(), dpipe::WorkerError);  // the failure stays
}

TEST_CASE("transport: a drained merge saves what it holds / and a fresh one continues from it", "[mp][concurrency]") {
  TestRing ring_a(4096);
  TestRing ring_b(4096);
  Bell reader_bell;
  dpipe::StateStore state;
  {
    Producer a(ring_a, reader_bell, [](RingSink& sink) {
      sink.write_record(RecordKind::kResetAck, marker_payload(1));
      for (int i = 0; i < 6; ++i) write_int(sink, i);
      sink.write_record(RecordKind::kPaused, marker_payload(9));
    });
    Producer b(ring_b, reader_bell, [](RingSink& sink) {
      sink.write_record(RecordKind::kResetAck, marker_payload(1));
      for (int i = 0; i < 3; ++i) write_int(sink, 100 + i);
      sink.write_record(RecordKind::kEnd, {});
      sink.write_record(RecordKind::kPaused, marker_payload(9));
    });
    AlwaysAlive alive;
    Merge merge(
        {StreamLink{ring_a.memory(), &a.bell(), nullptr, "a"}, StreamLink{ring_b.memory(), &b.bell(), nullptr, "b"}},
        Endpoint{&reader_bell, &alive, std::chrono::milliseconds(0)}, [] { return std::uint64_t{1}; });
    merge.reset();
    CHECK(as_int(*merge.next()) == 0);
    CHECK(as_int(*merge.next()) == 100);
    CHECK(as_int(*merge.next()) == 1);
    dpipe::StateStore running;
    dpipe::StateWriter running_writer(running, "merge");
    CHECK_THROWS_AS(merge.save_state(running_writer), dpipe::StateError);  // not drained
    merge.drain_until_paused(9);
    dpipe::StateWriter writer(state, "merge");
    merge.save_state(writer);
  }
  TestRing empty(4096);
  Bell writer_bell;
  AlwaysAlive alive;
  Merge restored(
      {StreamLink{empty.memory(), &writer_bell, nullptr, "a"}, StreamLink{empty.memory(), &writer_bell, nullptr, "b"}},
      Endpoint{&reader_bell, &alive, std::chrono::milliseconds(0)}, [] { return std::uint64_t{1}; });
  restored.load_state(dpipe::StateReader(state, "merge"));
  CHECK(state.unread("").empty());
  std::vector<std::int64_t> rest;
  for (int i = 0; i < 6; ++i) rest.push_back(as_int(*restored.next()));
  CHECK(rest == std::vector<std::int64_t>{101, 2, 102, 3, 4, 5});
}

}  // namespace

namespace {

using dpipe::detail::transport::CyclicOrder;

TEST_CASE("transport: the cyclic merge order skips ended inputs / and checkpoints its place", "[mp]") {
  CyclicOrder order(3);
  std::vector<std::size_t> taken;
  const auto take = [&] {
    const std::size_t input = order.next();
    taken.push_back(input);
    order.took(input);
  };
  take();
  take();
  order.ended(order.next());  // input 2 ends
  take();
  take();
  CHECK(taken == std::vector<std::size_t>{0, 1, 0, 1});
  CHECK(order.live() == 2);
  CHECK(order.has_ended(2));
  dpipe::StateStore store;
  dpipe::StateWriter writer(store, "merge");
  order.save_state(writer);
  CyclicOrder restored(3);
  restored.load_state(dpipe::StateReader(store, "merge"));
  CHECK(restored.live() == 2);
  CHECK(restored.next() == 0);
  CHECK(restored.has_ended(2));
  restored.reset();
  CHECK(restored.live() == 3);
  CHECK_FALSE(restored.has_ended(2));

  CyclicOrder other(2);
  CHECK_THROWS_MATCHES(other.load_state(dpipe::StateReader(store, "merge")), dpipe::StateError,
                       Catch::Message("merge: the checkpoint merges 3 processes, this one 2"));
  dpipe::StateStore far;
  dpipe::StateWriter far_writer(far, "merge");
  far_writer.write("cursor", std::uint64_t{7});
  far_writer.write("exhausted", std::vector<bool>(3, false));
  CHECK_THROWS_MATCHES(restored.load_state(dpipe::StateReader(far, "merge")), dpipe::StateError,
                       Catch::Message("merge: merge position 7 out of range"));
}

}  // namespace

namespace {

TEST_CASE("transport: elements pass encoded or as handles through the same ring and merge", "[mp][concurrency]") {
  using dpipe::detail::transport::ElementPassing;
  const std::vector<std::string> words{"one", "two", std::string(5000, 'x'), "four"};
  for (const ElementPassing* passing :
       {&dpipe::detail::transport::encoded_elements(), &dpipe::detail::transport::element_handles()}) {
    const bool handles = passing == &dpipe::detail::transport::element_handles();
    const auto source = dpipe::iter::from(words);
    const dpipe::DataPipePtr node = source.ptr();
    CHECK((passing->handoff(node) != nullptr) == handles);
    TestRing ring(1 << 16);
    Bell reader_bell;
    std::size_t encoded = 0;  // checked once the producer joined: Catch is not thread-safe
    auto producer = std::make_unique<Producer>(ring, reader_bell, [&](RingSink& sink) {
      sink.write_record(RecordKind::kResetAck, marker_payload(1));
      source.node().reset();
      encoded = passing->encoder(node)->encode(10, sink);
      sink.write_record(RecordKind::kEnd, {});
      sink.flush();
    });
    AlwaysAlive alive;
    auto merge = std::make_shared<Merge>(
        std::vector<StreamLink>{StreamLink{ring.memory(),
                                           &producer->bell(),
                                           nullptr,
                                           "producer",
                                           dpipe::detail::transport::Activity::kWaitingForDispatcher,
                                           {},
                                           passing->handoff(node)}},
        Endpoint{&reader_bell, &alive, std::chrono::milliseconds(0)}, [] { return std::uint64_t{1}; });
    const auto received = dpipe::graph::as_iter<std::string>(passing->receiver(node, merge, "received"));
    CHECK(received.node().name() == "received");
    CHECK(dpipe::testing::collect(received) == words);
    producer.reset();
    CHECK(encoded == words.size());
  }
}

}  // namespace

namespace {

using dpipe::detail::transport::Activity;

/// A dispatching child (MultiProcessingReadingService's) running in a thread over a shared pool,
/// its 2 workers played by the test: it deals iter::from(range(100)) element j to worker j mod 2,
/// at most `budget` elements in flight to each.
class DispatcherUnderTest {
 public:
  explicit DispatcherUnderTest(std::size_t budget)
      : source_(dpipe::iter::from(dpipe::testing::range(100))),
        plan_(plan(source_, budget)),
        pool_(dpipe::detail::transport::PoolSizes{.workers = 2,
                                                  .dispatcher = true,
                                                  .data_ring = 4096,
                                                  .dispatch_ring = 4096,
                                                  .control_ring = 4096,
                                                  .reply_ring = 4096}),
        thread_([this] {
          dpipe::detail::mp::ChildLaunch launch;
          launch.pool = &pool_;
          launch.plan = &plan_;
          dpipe::detail::mp::make_dispatcher(launch)->run();
        }) {}
  ~DispatcherUnderTest() {
    pool_.dispatcher().stop.store(1, std::memory_order_release);
    pool_.dispatcher().bell.ring();
    thread_.join();
  }
  DispatcherUnderTest(const DispatcherUnderTest&) = delete;
  DispatcherUnderTest& operator=(const DispatcherUnderTest&) = delete;

  /// Starts epoch 1, as the main process does.
  void start_epoch() {
    using dpipe::detail::transport::ControlMessage;
    dpipe::detail::transport::RingWriter control(pool_.dispatcher_control());
    const auto message = dpipe::to_bytes(
        ControlMessage{dpipe::detail::transport::Command::kReset, 1, 0, dpipe::SeedGenerator(1), std::nullopt});
    REQUIRE(control.try_write(RecordKind::kControl, message));
    pool_.dispatcher().bell.ring();
  }
  /// Returns once the dispatching child waits for room after publishing an element to worker 0
  /// that `reader` did not see yet (it set the board to kRunning before producing it).
  void await_waiting_after_element(dpipe::detail::transport::RingReader& reader) const {
    while (!reader.peek()) std::this_thread::yield();
    while (pool_.dispatcher().board.get() != Activity::kWaitingForRoom) std::this_thread::yield();
  }
  [[nodiscard]] const dpipe::detail::transport::SharedPool& pool() const { return pool_; }

 private:
  static dpipe::detail::mp::GroupPlan plan(const dpipe::IterPipe<int>& source, std::size_t budget) {
    dpipe::detail::mp::GroupPlan plan;
    plan.config.num_workers = 2;
    plan.config.worker_prefetch_cnt = budget;
    plan.dispatched = source.ptr();
    return plan;
  }

  dpipe::IterPipe<int> source_;
  dpipe::detail::mp::GroupPlan plan_;
  dpipe::detail::transport::SharedPool pool_;
  std::thread thread_;
};

TEST_CASE("transport: a dispatching child about to wait wakes a worker that asked for more elements than it got",
          "[mp][concurrency]") {
  // Worker 1 takes nothing (it is paused, or its queue is full): once worker 1's share fills its
  // budget, the dispatching child deals worker 0 one element and waits. Worker 0 sleeps until 8
  // elements are there, or until its writer rings it before waiting. Without that ring it slept
  // out its timer for every element (checkpoint saves of seconds, issue 33).
  constexpr std::size_t kBudget = 2;
  DispatcherUnderTest dispatcher(kBudget);
  const auto& pool = dispatcher.pool();
  dpipe::detail::transport::RingReader worker0(pool.dispatch_ring(0));
  Bell& worker0_bell = pool.worker(0).bell;
  dispatcher.start_epoch();
  // The epoch's marker and worker 0's first kBudget elements (0, 2): the child waits with both
  // workers' budgets full.
  dispatcher.await_waiting_after_element(worker0);

  // Worker 0 starves: it takes what it has, asks for 8 elements and sleeps. The child deals it
  // element 4 at once (within kReaderBatchWait of the worker starting to wait, when publishing
  // alone does not ring), then waits for worker 1's room.
  worker0.start_waiting(8);
  RingHeader& header = *pool.dispatch_ring(0).header;
  header.reader_waits_since.store(INT64_MAX, std::memory_order_relaxed);  // the deal comes at once
  const auto asleep = worker0_bell.prepare();
  std::vector<RecordKind> kinds;
  std::vector<int> taken;
  bool wake_dispatcher = false;
  for (std::size_t i = 0; i < 1 + kBudget; ++i) {
    const auto record = worker0.peek();
    REQUIRE(record);
    kinds.push_back(record->kind);
    if (record->kind == RecordKind::kElement) taken.push_back(dpipe::from_bytes<int>(record->payload));
    wake_dispatcher = worker0.release(*record) || wake_dispatcher;
  }
  CHECK(kinds == std::vector<RecordKind>{RecordKind::kResetAck, RecordKind::kElement, RecordKind::kElement});
  CHECK(taken == std::vector<int>{0, 2});
  REQUIRE(wake_dispatcher);  // it asked to hear of room for worker 0
  pool.dispatcher().bell.ring();
  dispatcher.await_waiting_after_element(worker0);
  const bool rung = worker0_bell.prepare() != asleep;
  worker0_bell.cancel();
  worker0_bell.cancel();
  worker0.stop_waiting();
  CHECK(rung);
  const auto record = worker0.peek();
  REQUIRE(record);
  CHECK(dpipe::from_bytes<int>(record->payload) == 4);
}

TEST_CASE("transport: a fed worker whose outputs nobody reads takes at most kFedLead feed elements and a batch",
          "[mp][concurrency]") {
  // The main process reads the workers in turn. While it waits for worker 1, worker 0 must not
  // run far ahead of worker 1 in its feed: the dispatching child holds worker 1's share of what
  // worker 0 took beyond, and raises BufferOverflowError at kBufferSize. Here worker 0's outputs
  // (batches of 64) take less than the allowance for small elements, which once let it take
  // about 124 batches' worth of its feed.
  using dpipe::detail::mp::kFedLead;
  using dpipe::detail::transport::RingWriter;
  // The pool outlives the plan, whose graph the worker fed from the pool's rings.
  const dpipe::detail::transport::SharedPool pool(dpipe::detail::transport::PoolSizes{.workers = 2,
                                                                                      .dispatcher = true,
                                                                                      .data_ring = 1 << 20,
                                                                                      .dispatch_ring = 4096,
                                                                                      .control_ring = 4096,
                                                                                      .reply_ring = 4096});
  const auto pipe = dpipe::iter::from(std::vector<std::int64_t>{})
                        .sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing)
                        .batch(64);
  const auto traversed = dpipe::graph::traverse_dps(pipe);
  dpipe::detail::mp::GroupPlan plan;
  plan.config.num_workers = 2;
  plan.dispatched = dpipe::graph::find_lca_round_robin_sharding_dp(traversed);
  plan.branch = dpipe::graph::replace_dp(traversed, plan.dispatched,
                                         dpipe::apply_typed_op<dpipe::ops::Placeholder>(plan.dispatched))
                    .root();
  auto& slot = pool.worker(0);
  std::thread worker([&] {
    dpipe::detail::mp::ChildLaunch launch;
    launch.pool = &pool;
    launch.plan = &plan;
    launch.worker_id = 0;
    dpipe::detail::mp::make_worker(launch)->run();
  });
  // Epoch 1, as the main process starts it; then its marker and elements, as the dispatching
  // child deals them, until worker 0 waits for room in its data ring (which nobody reads).
  RingWriter control(pool.worker_control(0));
  using dpipe::detail::transport::ControlMessage;
  REQUIRE(control.try_write(RecordKind::kControl,
                            dpipe::to_bytes(ControlMessage{dpipe::detail::transport::Command::kReset, 1, 0,
                                                           dpipe::SeedGenerator(1), std::nullopt})));
  RingWriter feed(pool.dispatch_ring(0));
  REQUIRE(feed.try_write(RecordKind::kResetAck, marker_payload(1)));
  slot.bell.ring();
  std::int64_t dealt = 0;
  while (slot.board.get() != Activity::kWaitingForRoom) {
    if (feed.try_write(RecordKind::kElement, dpipe::to_bytes(dealt))) {
      ++dealt;
      slot.bell.ring();
    } else {
      std::this_thread::yield();
    }
  }
  const std::uint64_t taken = pool.dispatch_ring(0).header->released_elements.load(std::memory_order_acquire);
  slot.stop.store(1, std::memory_order_release);
  slot.bell.ring();
  worker.join();
  CHECK(taken >= kFedLead);
  CHECK(taken <= kFedLead + 64);
}

}  // namespace
