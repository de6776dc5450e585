// DistributedReadingService with the ranks of a job as threads of this process (each with its own
// loader and its own connection to the store), so that the store, its server thread and fullsync
// also run under ThreadSanitizer: a trainer's own store, a stray client and garbage during a job,
// a rank that shuts down early, shutdown without leaks, pause and limit, a world of one.

#include <catch2/catch.hpp>

#include <functional>
#include <latch>
#include <numeric>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <dpipe/dpipe.hpp>

#include "support/free_port.hpp"
#include "support/memory_store.hpp"
#include "support/process_snapshot.hpp"
#include "support/raw_peer.hpp"

namespace {

using namespace std::chrono_literals;
using Loader = dpipe::DataLoader2<std::int64_t>;

dpipe::IterPipe<std::int64_t> numbers(std::int64_t n) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return dpipe::iter::from(std::move(values));
}

/// The options of rank `rank` of a world of `world` whose store rank 0 serves on `port`.
dpipe::DistributedOptions rank_options(std::size_t rank, std::size_t world, std::uint16_t port) {
  dpipe::DistributedOptions options;
  options.timeout = 20s;
  options.rendezvous.rank = rank;
  options.rendezvous.world_size = world;
  options.rendezvous.store_host = "127.0.0.1";
  options.rendezvous.store_port = port;
  options.rendezvous.token = "threads-test";
  options.name = "job";
  return options;
}

/// Runs `body(rank)` for every rank of a world of `world` in threads of its own; returns what
/// each returned, or "error: <what>" for what it threw.
template <class Body>
std::vector<std::string> run_ranks(std::size_t world, Body body) {
  std::vector<std::string> results(world);
  std::vector<std::thread> ranks;
  for (std::size_t rank = 0; rank < world; ++rank) {
    ranks.emplace_back([&, rank] {
      try {
        results[rank] = body(rank);
      } catch (const std::exception& error) {
        results[rank] = std::string("error: ") + error.what();
      }
    });
  }
  for (auto& rank : ranks) rank.join();
  return results;
}

/// One epoch of `loader` as "a b c".
std::string epoch_of(Loader& loader) {
  std::string text;
  for (const std::int64_t x : loader) text += (text.empty() ? "" : " ") + std::to_string(x);
  return text;
}

std::string joined(const std::vector<int>& values) {
  std::string text;
  for (const int value : values) text += (text.empty() ? "" : " ") + std::to_string(value);
  return text;
}

}  // namespace

TEST_CASE("Distributed threads: ranks as threads give torchdata's order", "[distributed][concurrency]") {
  const std::uint16_t port = dpipe::testing::free_port();
  const auto results = run_ranks(2, [&](std::size_t rank) {
    Loader loader(numbers(23).shuffle().sharding_filter(), dpipe::DistributedReadingService(rank_options(rank, 2, port)));
    loader.seed(123);
    const std::string first = epoch_of(loader);
    return first + " | " + epoch_of(loader);
  });
  CHECK(results[0] == joined({17, 12, 3, 7, 4, 8, 18, 2, 20, 6, 16}) + " | " +
                          joined({9, 18, 10, 4, 16, 20, 2, 6, 22, 15, 7}));
  CHECK(results[1] == joined({10, 21, 22, 5, 13, 0, 9, 11, 19, 1, 15}) + " | " +
                          joined({8, 5, 17, 11, 13, 1, 3, 19, 21, 0, 12}));
}

// Every process of a job may build a loader of its own alone (rank 0 of a world of one), which
// uses no store: the job's loaders built after it must still meet under one name on every rank.
TEST_CASE("Distributed threads: a loader of one process alone does not shift the job's loaders",
          "[distributed][concurrency]") {
  const std::uint16_t port = dpipe::testing::free_port();
  {
    Loader alone(numbers(5), dpipe::DistributedReadingService(rank_options(0, 1, port)));
    CHECK(epoch_of(alone) == "0 1 2 3 4");
  }
  const auto results = run_ranks(2, [&](std::size_t rank) {
    Loader loader(numbers(23).shuffle().sharding_filter(), dpipe::DistributedReadingService(rank_options(rank, 2, port)));
    loader.seed(123);
    return epoch_of(loader);
  });
  CHECK(results[0] == joined({17, 12, 3, 7, 4, 8, 18, 2, 20, 6, 16}));
  CHECK(results[1] == joined({10, 21, 22, 5, 13, 0, 9, 11, 19, 1, 15}));
}

TEST_CASE("Distributed threads: a store the trainer already has", "[distributed][concurrency]") {
  const auto store = std::make_shared<dpipe::testing::MemoryStore>();
  const auto results = run_ranks(2, [&](std::size_t rank) {
    dpipe::DistributedOptions options;
    options.timeout = 20s;
    options.rendezvous.rank = rank;
    options.rendezvous.world_size = 2;
    options.store = store;
    options.name = "train";
    Loader loader(numbers(23).shuffle().sharding_filter(), dpipe::DistributedReadingService(options));
    loader.seed(123);
    return epoch_of(loader);
  });
  CHECK(results[0] == joined({17, 12, 3, 7, 4, 8, 18, 2, 20, 6, 16}));
  CHECK(results[1] == joined({10, 21, 22, 5, 13, 0, 9, 11, 19, 1, 15}));
  // Every key went under the loader's prefix: a seed round and the fullsync rounds, two keys each.
  CHECK(store->size() % 2 == 0);
  CHECK(store->get_text("dpipe/train/0/seed/0/0").size() == 8);  // rank 0's seed, round 0
}

TEST_CASE("Distributed threads: a stray client and garbage during a job are refused and the job goes on",
          "[distributed][concurrency]") {
  const std::uint16_t port = dpipe::testing::free_port();
  std::latch started(2);      // both ranks have their first element
  std::latch strays_done(1);  // the strays have been turned away
  std::vector<std::string> results;
  std::thread job([&] {
    results = run_ranks(2, [&](std::size_t rank) {
      auto options = rank_options(rank, 2, port);
      options.fullsync_block = 16;
      // Counts down once, on the first element or on the way out, so that the test never waits
      // for a rank that failed before it.
      struct Start {
        std::latch& latch;
        bool counted = false;
        void count() {
          if (!std::exchange(counted, true)) latch.count_down();
        }
        ~Start() { count(); }
      } start{started};
      Loader loader(numbers(1000).sharding_filter(), dpipe::DistributedReadingService(options));
      std::size_t count = 0;
      std::int64_t sum = 0;
      for (const std::int64_t x : loader) {
        if (count++ == 0) {
          start.count();
          strays_done.wait();
        }
        sum += x;
      }
      return std::to_string(count) + " elements, sum " + std::to_string(sum);
    });
  });
  started.wait();
  dpipe::TcpStoreOptions stray;
  stray.port = port;
  stray.token = "another-job";
  stray.timeout = 2s;
  CHECK_THROWS_MATCHES(dpipe::TcpStore(stray), dpipe::RendezvousError,
                       Catch::Message(fmt::format(
                           "TcpStore: the store refused the connection: a wrong job token (127.0.0.1:{})", port)));
  {
    dpipe::testing::RawPeer garbage(port);
    std::vector<std::byte> frame{std::byte{16}, std::byte{0}, std::byte{0}, std::byte{0}};
    for (int i = 0; i < 16; ++i) frame.push_back(static_cast<std::byte>(0xa5 ^ (i * 37)));
    garbage.send(frame);
    CHECK(garbage.reply().error == "the store refused the connection: a malformed handshake (not a dpipe store "
                                   "handshake)");
    CHECK(garbage.closed_by_server());
  }
  {
    dpipe::testing::RawPeer oversized(port);
    oversized.send(dpipe::testing::hello(dpipe::TcpStore::kProtocolVersion, "threads-test"));
    CHECK(oversized.reply().ok);
    oversized.send({std::byte{0}, std::byte{0}, std::byte{0}, std::byte{0x40}});  // a frame of 1 GiB
    CHECK(oversized.reply().error ==
          "the store refused the connection: a message of 1073741824 bytes exceeds the limit of 67108864");
    CHECK(oversized.closed_by_server());
  }
  strays_done.count_down();
  job.join();
  CHECK(results[0] == "500 elements, sum 249500");
  CHECK(results[1] == "500 elements, sum 250000");
}

TEST_CASE("Distributed threads: a rank that shuts its loader down mid-epoch is named", "[distributed][concurrency]") {
  const std::size_t leaving = GENERATE(std::size_t{0}, std::size_t{1});  // rank 0 serves the store too
  INFO("rank " << leaving << " leaves");
  const std::uint16_t port = dpipe::testing::free_port();
  const auto results = run_ranks(2, [&](std::size_t rank) {
    auto options = rank_options(rank, 2, port);
    options.fullsync_block = 8;
    Loader loader(numbers(1000).sharding_filter(), dpipe::DistributedReadingService(options));
    std::size_t count = 0;
    for (const std::int64_t x : loader) {
      (void)x;
      if (rank == leaving && ++count == 20) return std::string("left after 20");
    }
    return std::string("finished");
  });
  const std::size_t staying = 1 - leaving;
  CHECK(results[leaving] == "left after 20");
  CHECK_THAT(results[staying],
             Catch::StartsWith(fmt::format("error: DistributedReadingService (rank {} of 2 under options, rank 0 "
                                           "serving the store at 127.0.0.1:",
                                           staying)) &&
                 Catch::EndsWith(fmt::format(": rank {} is gone: it shut its loader down", leaving)));
}

TEST_CASE("Distributed threads: shutdown mid-epoch leaves no thread or socket behind", "[distributed][concurrency]") {
  const std::uint16_t port = dpipe::testing::free_port();
  const auto workers = GENERATE(0, 2);
  const auto before = dpipe::testing::ProcessSnapshot::take();
  const auto results = run_ranks(2, [&](std::size_t rank) {
    const dpipe::DistributedReadingService distributed(rank_options(rank, 2, port));
    dpipe::MultiProcessingOptions threads;
    threads.num_workers = 2;
    threads.worker_kind = dpipe::WorkerKind::kThread;
    auto pipe = numbers(10000).shuffle().sharding_filter();
    std::optional<Loader> loader;
    if (workers == 0) {
      loader.emplace(pipe, distributed);
    } else {
      loader.emplace(pipe, dpipe::SequentialReadingService(distributed, dpipe::MultiProcessingReadingService(threads)));
    }
    std::size_t count = 0;
    for (const std::int64_t x : *loader) {
      (void)x;
      if (++count == 300) break;
    }
    loader.reset();
    return std::to_string(count);
  });
  CHECK(results == std::vector<std::string>{"300", "300"});
  const auto after = dpipe::testing::ProcessSnapshot::take();
  CHECK(after.threads == before.threads);
  CHECK(after.descriptors == before.descriptors);
}

TEST_CASE("Distributed threads: pause and limit with worker threads", "[distributed][concurrency]") {
  const std::uint16_t port = dpipe::testing::free_port();
  const auto results = run_ranks(2, [&](std::size_t rank) {
    dpipe::MultiProcessingOptions threads;
    threads.num_workers = 2;
    threads.worker_kind = dpipe::WorkerKind::kThread;
    const auto pipe = numbers(41).shuffle().sharding_filter();
    Loader whole(pipe, dpipe::SequentialReadingService(dpipe::DistributedReadingService(rank_options(rank, 2, port)),
                                                       dpipe::MultiProcessingReadingService(threads)));
    whole.seed(123);
    const std::string expected = epoch_of(whole);
    whole.shutdown();

    auto options = rank_options(rank, 2, port);
    options.name = "limited";
    Loader limited(pipe, dpipe::SequentialReadingService(dpipe::DistributedReadingService(options),
                                                         dpipe::MultiProcessingReadingService(threads)));
    limited.seed(123);
    std::string text;
    std::vector<std::size_t> rounds;
    auto it = limited.begin();
    limited.limit(5);
    for (std::size_t seen = 0; seen < 20;) {
      std::size_t got = 0;
      for (; it != limited.end(); ++it, ++got) text += (text.empty() ? "" : " ") + std::to_string(*it);
      seen += got;
      rounds.push_back(got);
      limited.resume();
    }
    return std::string(text == expected ? "same" : "different: " + text + " / " + expected) + ", rounds " +
           joined(std::vector<int>(rounds.begin(), rounds.end()));
  });
  CHECK(results[0] == "same, rounds 5 5 5 5");
  CHECK(results[1] == "same, rounds 5 5 5 5");
}

TEST_CASE("Distributed threads: the epoch length is the smallest shard and starts nothing", "[distributed][concurrency]") {
  const auto before = dpipe::testing::ProcessSnapshot::take();
  Loader loader(numbers(23).shuffle().sharding_filter(),
                dpipe::DistributedReadingService(rank_options(1, 2, dpipe::testing::free_port())));
  CHECK(loader.epoch_length() == 11);
  Loader batches(numbers(100).shuffle().sharding_filter().batch(8).map([](const std::vector<std::int64_t>& batch) {
    return static_cast<std::int64_t>(batch.size());
  }),
                 dpipe::DistributedReadingService(rank_options(0, 3, dpipe::testing::free_port())));
  CHECK(batches.epoch_length() == 5);  // shards of 34, 33 and 33: 5 batches each
  const auto after = dpipe::testing::ProcessSnapshot::take();
  CHECK(after.descriptors == before.descriptors);
  CHECK(after.threads == before.threads);
}

namespace {

/// Rank `rank` of 2 (store on `port`) with 2 workers of `kind`.
Loader with_workers(const dpipe::IterPipe<std::int64_t>& pipe, std::size_t rank, std::uint16_t port,
                    dpipe::WorkerKind kind) {
  dpipe::MultiProcessingOptions workers;
  workers.num_workers = 2;
  workers.worker_kind = kind;
  return Loader(pipe, dpipe::SequentialReadingService(dpipe::DistributedReadingService(rank_options(rank, 2, port)),
                                                      dpipe::MultiProcessingReadingService(workers)));
}

std::int64_t size_of(const std::vector<std::int64_t>& batch) { return static_cast<std::int64_t>(batch.size()); }

}  // namespace

TEST_CASE("Distributed threads: the epoch length with workers of either kind is the least rank's",
          "[distributed][concurrency]") {
  // 41 ids on 2 ranks x 2 workers: worker w of rank r keeps instance w + 2 * r of 4, shards of 11,
  // 10, 10 and 10 ids. Each worker batches its own shard: 3 + 2 batches of 5 on rank 0, 2 + 2 on
  // rank 1, and fullsync ends both ranks at 4. Unbatched: 21 and 20, so 20. Batches of 10 made in
  // the main process over the merged shards: 3 and 2, so 2.
  const std::vector<std::pair<std::string, std::function<dpipe::IterPipe<std::int64_t>()>>> pipelines = {
      {"batched in the workers", [] { return numbers(41).shuffle().sharding_filter().batch(5).map(size_of); }},
      {"unbatched", [] { return numbers(41).shuffle().sharding_filter(); }},
      {"batched in the main process", [] {
         auto batches = numbers(41).shuffle().sharding_filter().batch(10);
         batches.node().set_replicable(false);
         return batches.map(size_of);
       }}};
  const std::vector<std::size_t> expected = {4, 20, 2};
  const std::uint16_t port = dpipe::testing::free_port();
  const auto before = dpipe::testing::ProcessSnapshot::take();
  for (const auto kind : {dpipe::WorkerKind::kProcess, dpipe::WorkerKind::kThread}) {
    for (std::size_t i = 0; i < pipelines.size(); ++i) {
      for (std::size_t rank = 0; rank < 2; ++rank) {
        INFO(pipelines[i].first << ", rank " << rank << ", worker "
                                << (kind == dpipe::WorkerKind::kThread ? "threads" : "processes"));
        auto loader = with_workers(pipelines[i].second(), rank, port, kind);
        CHECK(loader.epoch_length() == expected[i]);
      }
    }
  }
  const auto after = dpipe::testing::ProcessSnapshot::take();
  CHECK(after.descriptors == before.descriptors);  // worked out without starting anything
  CHECK(after.threads == before.threads);
  // What the ranks then yield with worker threads (ranks as processes: "Distributed: the epoch
  // length with workers is what every rank yields").
  const auto results = run_ranks(2, [&](std::size_t rank) {
    std::string counts;
    for (const auto& pipeline : pipelines) {
      auto loader = with_workers(pipeline.second(), rank, port, dpipe::WorkerKind::kThread);
      std::size_t count = 0;
      for (auto it = loader.begin(); it != loader.end(); ++it) ++count;
      counts += (counts.empty() ? "" : " ") + std::to_string(count);
    }
    return counts;
  });
  CHECK(results[0] == "4 20 2");
  CHECK(results[1] == "4 20 2");
}

TEST_CASE("Distributed threads: a world of one opens no socket", "[distributed][concurrency]") {
  dpipe::DistributedOptions options;
  options.rendezvous.rank = 0;
  options.rendezvous.world_size = 1;
  Loader loader(numbers(23).shuffle().sharding_filter(), dpipe::DistributedReadingService(options));
  loader.seed(123);
  const auto before = dpipe::testing::ProcessSnapshot::take();
  std::size_t count = 0;
  for (const std::int64_t x : loader) {
    (void)x;
    if (++count == 1) {
      const auto during = dpipe::testing::ProcessSnapshot::take();
      CHECK(during.descriptors == before.descriptors);
      CHECK(during.threads == before.threads);
    }
  }
  CHECK(count == 23);
}
