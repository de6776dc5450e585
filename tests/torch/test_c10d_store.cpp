// C10dStore: torch.distributed's store as a dpipe::Store, against a real c10d::TCPStore. Its own
// calls, then two ranks (dpipe_c10d_rank_program) whose loaders ride on the c10d store: the same
// orders as with dpipe's TcpStore, and a rank that dies is named by the other.

#include <chrono>
#include <csignal>
#include <cstdint>
#include <regex>
#include <string>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/torch/c10d_store.hpp>

// libtorch's logging (glog) defines CHECK; the tests mean Catch's.
#undef CHECK
#include <catch2/catch.hpp>

#include "support/free_port.hpp"
#include "support/rank_job.hpp"

namespace {

using dpipe::testing::Environment;

/// A c10d::TCPStore served by this process, for one rank, with a short timeout.
c10::intrusive_ptr<::c10d::TCPStore> serve_c10d_store() {
  ::c10d::TCPStoreOptions options;
  options.port = dpipe::testing::free_port();
  options.isServer = true;
  options.numWorkers = 1;
  options.waitWorkers = false;
  options.timeout = std::chrono::seconds(10);  // connecting (c10d counts it in whole seconds)
  auto store = c10::make_intrusive<::c10d::TCPStore>("127.0.0.1", options);
  store->setTimeout(std::chrono::milliseconds(300));
  return store;
}

std::vector<std::byte> bytes(const std::string& text) {
  const auto* data = reinterpret_cast<const std::byte*>(text.data());
  return {data, data + text.size()};
}

std::string text(const std::vector<std::byte>& value) {
  return {reinterpret_cast<const char*>(value.data()), value.size()};
}

/// torchrun's variables for a job of 2, with torch.distributed's store on a free MASTER_PORT.
std::vector<Environment> c10d_ranks() {
  const std::string master_port = std::to_string(dpipe::testing::free_port());
  std::vector<Environment> ranks;
  for (std::size_t rank = 0; rank < 2; ++rank) {
    auto environment = dpipe::testing::torchrun_environment(rank, 2, dpipe::testing::free_port());
    environment["MASTER_PORT"] = master_port;
    ranks.push_back(environment);
  }
  return ranks;
}

}  // namespace

TEST_CASE("C10dStore: set get add remove and compare_set as dpipe::Store says", "[distributed][torch]") {
  const auto c10d = serve_c10d_store();
  dpipe::C10dStore store(c10d);
  store.set("a", std::string_view("one"));
  CHECK(store.get_text("a") == "one");
  CHECK(store.add("n", 2) == 2);
  CHECK(store.add("n", 3) == 5);
  CHECK(store.remove("a"));
  CHECK_FALSE(store.remove("a"));
  CHECK(store.timeout() == std::chrono::milliseconds(300));

  CHECK(text(store.compare_set("c", {}, bytes("new"))) == "new");          // held nothing: set
  CHECK(text(store.compare_set("c", bytes("old"), bytes("x"))) == "new");  // another value: unchanged
  CHECK(text(store.compare_set("c", bytes("new"), bytes("x"))) == "x");
  CHECK(store.compare_set("d", bytes("old"), bytes("x")).empty());  // holds nothing, and still does
  CHECK_FALSE(c10d->check({"d"}));

  CHECK_THROWS_MATCHES(store.get("missing"), dpipe::TimeoutError,
                       Catch::Message("c10d store: get('missing'): 'missing' did not arrive within 300 ms"));
  CHECK_THROWS_MATCHES(dpipe::C10dStore(c10::intrusive_ptr<::c10d::Store>()), dpipe::InvalidArgument,
                       Catch::Message("C10dStore: the c10d store is null"));
}

TEST_CASE("C10dStore: an exchange names the ranks that did not post and deletes collected rounds",
          "[distributed][torch]") {
  const auto c10d = serve_c10d_store();
  dpipe::C10dStore store(c10d);
  const auto values = store.exchange("round", bytes("mine"), "round", 0, 1);
  REQUIRE(values.size() == 1);
  CHECK(text(values[0]) == "mine");
  CHECK_FALSE(c10d->check({"round/0"}));  // every rank collected it
  CHECK_THROWS_MATCHES(
      store.exchange("late", bytes("mine"), "late", 0, 3), dpipe::TimeoutError,
      Catch::Message("c10d store: exchange(collect 'late', rank 0 of 3): rank 1, rank 2 did not arrive within 300 ms"));
}

TEST_CASE("C10dStore: two ranks on torch.distributed's store yield the orders of dpipe's TcpStore",
          "[distributed][torch]") {
  for (const std::string workers : {"0", "2"}) {
    INFO(workers << " workers");
    const std::vector<std::string> args{"shuffled", "--seed", "3", "--epochs", "2", "--workers", workers};
    std::vector<Environment> tcp;
    const auto port = dpipe::testing::free_port();
    for (std::size_t rank = 0; rank < 2; ++rank) tcp.push_back(dpipe::testing::torchrun_environment(rank, 2, port));
    const auto with_tcp = dpipe::testing::run_ranks(DPIPE_RANK_PROGRAM, args, tcp);
    const auto with_c10d = dpipe::testing::run_ranks(DPIPE_C10D_RANK_PROGRAM, args, c10d_ranks());
    for (std::size_t rank = 0; rank < 2; ++rank) {
      INFO("rank " << rank << ": " << with_c10d[rank].out << with_c10d[rank].err);
      REQUIRE(with_tcp[rank].exited(0));
      REQUIRE(with_c10d[rank].exited(0));
      CHECK(with_c10d[rank].out == with_tcp[rank].out);
      CHECK(with_c10d[rank].out.starts_with("epoch 0: "));
    }
  }
}

TEST_CASE("C10dStore: a rank killed mid-epoch is named by the other", "[distributed][torch][faults]") {
  auto ranks = c10d_ranks();
  ranks[1]["DPIPE_TEST_KILL_RANK"] = "1";
  const auto outcomes = dpipe::testing::run_ranks(DPIPE_C10D_RANK_PROGRAM,
                                                  {"long", "--kill-after", "100", "--timeout-ms", "3000"}, ranks);
  CHECK(outcomes[1].signaled(SIGKILL));
  REQUIRE(outcomes[0].exited(3));
  INFO(outcomes[0].out);
  CHECK(std::regex_match(
      outcomes[0].out,
      std::regex("error dpipe::RendezvousError: DistributedReadingService \\(rank 0 of 2\\): [^\n]*: c10d "
                 "store: [^\n]*: (rank 1|'[^']+') did not arrive within 3000 ms\n")));
}
