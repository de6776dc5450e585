// B6 (SPEC §11): distributed. 2 ranks on loopback, each a process of its own, with 0 and 2
// worker processes per rank: DistributedReadingService (rank 0's seed, fullsync over a TcpStore)
// beside the same pipeline without distribution in the same run (each rank's share sharded by
// hand, no store, no fullsync). Target: fullsync costs at most 10%. Also: rendezvous time for 2
// and 8 ranks, the store's operations per second, and how many store requests fullsync makes per
// rank per thousand elements. DPIPE_B6_BLOCK=n sets DistributedOptions::fullsync_block (default
// 1024) to see what the block size costs.

#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

#include <fmt/format.h>

#include <dpipe/dpipe.hpp>

#include "harness.hpp"
#include "support/free_port.hpp"

namespace {

using Clock = std::chrono::steady_clock;
using dpipe::testing::free_port;
using Batch = std::vector<std::int64_t>;
constexpr std::size_t kCount = 4'000'000;
constexpr int kEpochs = 3;
constexpr int kJobs = 3;

/// Runs `rank_body(rank)` in `world` forked processes at once; returns what each reported (a
/// few doubles through a pipe).
std::vector<std::vector<double>> run_ranks(std::size_t world,
                                           const std::function<std::vector<double>(std::size_t)>& rank_body) {
  std::vector<std::pair<pid_t, int>> ranks;
  for (std::size_t rank = 0; rank < world; ++rank) {
    int fds[2];
    if (::pipe(fds) != 0) std::abort();
    const pid_t pid = ::fork();
    if (pid == 0) {
      ::close(fds[0]);
      std::vector<double> report;
      try {
        report = rank_body(rank);
      } catch (const std::exception& error) {
        std::fprintf(stderr, "rank %zu: %s\n", rank, error.what());
        ::_exit(1);
      }
      const auto bytes = static_cast<ssize_t>(report.size() * sizeof(double));
      if (::write(fds[1], report.data(), static_cast<std::size_t>(bytes)) != bytes) ::_exit(2);
      ::_exit(0);
    }
    ::close(fds[1]);
    ranks.emplace_back(pid, fds[0]);
  }
  std::vector<std::vector<double>> reports;
  for (const auto& [pid, fd] : ranks) {
    std::vector<double> report(8);
    const ssize_t got = ::read(fd, report.data(), report.size() * sizeof(double));
    report.resize(got > 0 ? static_cast<std::size_t>(got) / sizeof(double) : 0);
    ::close(fd);
    int status = 0;
    ::waitpid(pid, &status, 0);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0 || report.empty()) {
      std::printf("  a rank failed\n");
      std::exit(1);
    }
    reports.push_back(std::move(report));
  }
  return reports;
}

dpipe::DistributedOptions rank_options(std::size_t rank, std::size_t world, std::uint16_t port) {
  dpipe::DistributedOptions options;
  options.timeout = std::chrono::seconds(60);
  options.rendezvous.rank = rank;
  options.rendezvous.world_size = world;
  options.rendezvous.store_host = "127.0.0.1";
  options.rendezvous.store_port = port;
  options.rendezvous.token = "b6";
  options.name = "b6";
  if (const char* block = std::getenv("DPIPE_B6_BLOCK")) options.fullsync_block = std::stoul(block);
  return options;
}

dpipe::IterPipe<Batch> pipeline() {
  std::vector<std::int64_t> values(kCount);
  std::iota(values.begin(), values.end(), std::int64_t{0});
  return dpipe::iter::from(std::move(values))
      .shuffle(10000)
      .sharding_filter()
      .map([](std::int64_t x) { return x * 3 + 1; })
      .batch(64);
}

/// The loader of `rank` of 2: distributed, or the same share sharded by hand.
dpipe::DataLoader2<Batch> make_loader(std::size_t rank, std::size_t workers, bool distributed, std::uint16_t port) {
  auto pipe = pipeline();
  const dpipe::MultiProcessingReadingService processes({.num_workers = workers});
  if (distributed) {
    const dpipe::DistributedReadingService service(rank_options(rank, 2, port));
    if (workers == 0) return dpipe::DataLoader2<Batch>(pipe, service);
    return dpipe::DataLoader2<Batch>(pipe, dpipe::SequentialReadingService(service, processes));
  }
  dpipe::graph::apply_sharding(pipe.ptr(), 2, rank, dpipe::ShardingPriority::kDistributed);
  if (workers == 0) return dpipe::DataLoader2<Batch>(pipe, dpipe::InProcessReadingService());
  return dpipe::DataLoader2<Batch>(pipe, processes);
}

/// The job's rate in elements per second: both ranks' elements over the job's best epoch, an
/// epoch of the job lasting as long as its slower rank's (as a trainer's steps wait for the
/// slowest rank), so that neither variant gets to pick each rank's luckiest epoch on its own.
double job_rate(std::size_t workers, bool distributed) {
  const std::uint16_t port = free_port();
  const auto reports = run_ranks(2, [&](std::size_t rank) {
    auto loader = make_loader(rank, workers, distributed, port);
    std::vector<double> report{0};  // elements, then each epoch's seconds
    for (int epoch = 0; epoch < kEpochs; ++epoch) {
      const auto start = Clock::now();
      std::uint64_t count = 0;
      for (const auto& batch : loader) count += batch.size();
      report.push_back(std::chrono::duration<double>(Clock::now() - start).count());
      report[0] = static_cast<double>(count);
    }
    return report;
  });
  double best = 1e300;
  for (int epoch = 1; epoch <= kEpochs; ++epoch) {
    const auto e = static_cast<std::size_t>(epoch);
    best = std::min(best, std::max(reports[0].at(e), reports[1].at(e)));
  }
  return (reports[0][0] + reports[1][0]) / best;
}

/// The longest time a rank of `world` takes from building its loader to its first element.
double rendezvous_seconds(std::size_t world) {
  const std::uint16_t port = free_port();
  const auto reports = run_ranks(world, [&](std::size_t rank) {
    const auto start = Clock::now();
    std::vector<std::int64_t> values(1000);
    std::iota(values.begin(), values.end(), std::int64_t{0});
    dpipe::DataLoader2<std::int64_t> loader(dpipe::iter::from(values).shuffle().sharding_filter(),
                                            dpipe::DistributedReadingService(rank_options(rank, world, port)));
    auto it = loader.begin();
    dpipe::bench::keep(*it);
    return std::vector<double>{std::chrono::duration<double>(Clock::now() - start).count()};
  });
  double slowest = 0;
  for (const auto& report : reports) slowest = std::max(slowest, report[0]);
  return slowest;
}

/// A store that counts the exchange requests a loader makes (and forwards everything).
class CountingStore final : public dpipe::Store {
 public:
  explicit CountingStore(std::shared_ptr<dpipe::Store> store) : store_(std::move(store)) {}
  void set(const std::string& key, std::span<const std::byte> value) override { store_->set(key, value); }
  std::vector<std::byte> get(const std::string& key) override { return store_->get(key); }
  std::int64_t add(const std::string& key, std::int64_t delta) override { return store_->add(key, delta); }
  std::vector<std::byte> compare_set(const std::string& key, std::span<const std::byte> expected,
                                     std::span<const std::byte> desired) override {
    return store_->compare_set(key, expected, desired);
  }
  void wait(const std::vector<std::string>& keys) override { store_->wait(keys); }
  bool remove(const std::string& key) override { return store_->remove(key); }
  std::vector<std::vector<std::byte>> exchange(const std::string& post, std::span<const std::byte> value,
                                               const std::string& collect, std::size_t rank,
                                               std::size_t world) override {
    ++requests;
    return store_->exchange(post, value, collect, rank, world);
  }
  [[nodiscard]] std::chrono::milliseconds timeout() const override { return store_->timeout(); }
  void set_timeout(std::chrono::milliseconds timeout) override { store_->set_timeout(timeout); }

  std::uint64_t requests = 0;

 private:
  std::shared_ptr<dpipe::Store> store_;
};

/// Store requests per rank per thousand elements over an epoch of 2 ranks with 2 workers each.
double requests_per_thousand() {
  const std::uint16_t port = free_port();
  const auto reports = run_ranks(2, [&](std::size_t rank) {
    dpipe::TcpStoreOptions tcp;
    tcp.port = port;
    tcp.serve = rank == 0;
    tcp.token = "b6";
    auto counting = std::make_shared<CountingStore>(std::make_shared<dpipe::TcpStore>(tcp));
    auto options = rank_options(rank, 2, port);
    options.store = counting;
    std::vector<std::int64_t> values(kCount);
    std::iota(values.begin(), values.end(), std::int64_t{0});
    dpipe::DataLoader2<std::int64_t> loader(
        dpipe::iter::from(std::move(values)).shuffle(10000).sharding_filter(),
        dpipe::SequentialReadingService(dpipe::DistributedReadingService(options),
                                        dpipe::MultiProcessingReadingService({.num_workers = 2})));
    std::uint64_t count = 0;
    for (const auto x : loader) count += x >= 0 ? 1 : 0;
    return std::vector<double>{static_cast<double>(counting->requests), static_cast<double>(count)};
  });
  return 1000.0 * reports[0][0] / reports[0][1];
}

/// set + get pairs per second from one client, and 2-rank all_gather rounds per second.
std::pair<double, double> store_rates() {
  dpipe::TcpStoreOptions server_options;
  server_options.serve = true;
  server_options.token = "b6";
  dpipe::TcpStore server(server_options);
  dpipe::TcpStoreOptions client_options;
  client_options.port = server.port();
  client_options.token = "b6";
  dpipe::TcpStore client(client_options);
  constexpr int kOperations = 20000;
  auto start = Clock::now();
  for (int i = 0; i < kOperations / 2; ++i) {
    client.set(fmt::format("key{}", i % 64), std::string_view("value"));
    dpipe::bench::keep(client.get(fmt::format("key{}", i % 64)).size());
  }
  const double operations = kOperations / std::chrono::duration<double>(Clock::now() - start).count();
  constexpr int kRounds = 5000;
  std::thread rank1([&] {
    dpipe::TcpStore store(client_options);
    for (int round = 0; round < kRounds; ++round) (void)store.all_gather(fmt::format("r{}", round), 1, 2, {});
  });
  start = Clock::now();
  for (int round = 0; round < kRounds; ++round) (void)server.all_gather(fmt::format("r{}", round), 0, 2, {});
  const double rounds = kRounds / std::chrono::duration<double>(Clock::now() - start).count();
  rank1.join();
  return {operations, rounds};
}

}  // namespace

int main() {
  std::printf(
      "B6 distributed: %zu int64 -> shuffle(10000) -> sharding_filter -> map -> batch(64), 2 ranks on loopback\n",
      kCount);
  for (const std::size_t workers : {std::size_t{0}, std::size_t{2}}) {
    // The best of three jobs each, taken in turn, so that the machine's drift hits both alike.
    double alone = 0;
    double synced = 0;
    for (int job = 0; job < kJobs; ++job) {
      alone = std::max(alone, job_rate(workers, false));
      synced = std::max(synced, job_rate(workers, true));
    }
    std::printf(
        "  %zu workers per rank: sharded by hand %8.2f M elements/s, DistributedReadingService %8.2f M "
        "elements/s: fullsync costs %+.1f%% (target <= 10%%)\n",
        workers, alone / 1e6, synced / 1e6, 100.0 * (alone / synced - 1.0));
  }
  std::printf("  store requests per rank per 1000 elements (2 workers per rank): %.3f (target <= 1)\n",
              requests_per_thousand());
  for (const std::size_t world : {std::size_t{2}, std::size_t{8}}) {
    std::printf("  rendezvous of %zu ranks (building the loader to its first element): %.1f ms\n", world,
                1e3 * rendezvous_seconds(world));
  }
  const auto [operations, rounds] = store_rates();
  std::printf(
      "  TcpStore on loopback: %.0f set/get operations per second (one client), %.0f all_gather rounds "
      "per second (2 ranks)\n",
      operations, rounds);
  return 0;
}
