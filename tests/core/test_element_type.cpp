// Element machinery compiled once (<dpipe/core/element_type.hpp>): a user type declared with
// DPIPE_EXTERN_ELEMENT_TYPE in its header and instantiated in one other translation unit
// (element_type_sample.cpp) runs through every reading service and restores from checkpoints; the
// library's own precompiled types do the same. CMake checks that this translation unit compiles
// none of Sample's machinery (element_type.compiled_once) and that a type declared extern and
// never instantiated fails to link (element_type.link_fail).

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "core/element_type_sample.hpp"
#include "support/battery.hpp"
#include "support/loader.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::InProcessReadingService;
using dpipe::MultiProcessingReadingService;
using dpipe::testing::epoch;
using dpipe::testing::range;
using dpipe_test::Sample;

dpipe::IterPipe<Sample> samples(int count) {
  return iter::from(range(count))
      .map([](int id) {
        return Sample{id, "sample-" + std::to_string(id)};
      })
      .shuffle(16)
      .sharding_filter();
}

MultiProcessingReadingService worker_threads(std::size_t n) {
  return MultiProcessingReadingService({.num_workers = n, .worker_kind = dpipe::WorkerKind::kThread});
}

bool by_id(const Sample& a, const Sample& b) { return a.id < b.id; }

TEST_CASE("Element type compiled elsewhere: a user type runs in process and through worker processes and threads",
          "[element_type]") {
  DataLoader2<Sample> in_process(samples(50), InProcessReadingService());
  in_process.seed(11);
  auto expected = epoch(in_process);
  auto sorted = expected;
  std::sort(sorted.begin(), sorted.end(), by_id);
  REQUIRE(sorted.size() == 50);
  CHECK(sorted.front() == Sample{0, "sample-0"});
  CHECK(sorted[17] == Sample{17, "sample-17"});
  CHECK(sorted.back() == Sample{49, "sample-49"});
  CHECK(expected != sorted);  // shuffled

  DataLoader2<Sample> processes(samples(50), dpipe::testing::workers(2));
  DataLoader2<Sample> threads(samples(50), worker_threads(2));
  processes.seed(11);
  threads.seed(11);
  const auto from_processes = epoch(processes);
  CHECK(from_processes == expected);
  CHECK(epoch(threads) == from_processes);
}

TEST_CASE("Element type compiled elsewhere: checkpoints of worker processes restore at every position",
          "[element_type]") {
  const auto rest =
      dpipe::testing::check_restore_sweep([] { return DataLoader2<Sample>(samples(12), dpipe::testing::workers(2)); });
  CHECK(rest.size() == 12);
}

TEST_CASE("Element types libdpipe compiles: strings and vectors of them cross worker processes", "[element_type]") {
  const auto pipe = [] {
    return iter::from(range(30))
        .map([](int id) { return std::to_string(id); })
        .shuffle(8)
        .sharding_filter()
        .map([](const std::string& id) {
          return std::vector<std::string>{id, id + "!"};
        });
  };
  DataLoader2<std::vector<std::string>> in_process(pipe(), InProcessReadingService());
  DataLoader2<std::vector<std::string>> processes(pipe(), dpipe::testing::workers(2));
  in_process.seed(5);
  processes.seed(5);
  const auto expected = epoch(in_process);
  std::vector<int> numbers;
  for (const auto& pair : expected) {
    REQUIRE(pair.size() == 2);
    CHECK(pair[1] == pair[0] + "!");
    numbers.push_back(std::stoi(pair[0]));
  }
  CHECK(numbers != range(30));  // shuffled
  std::sort(numbers.begin(), numbers.end());
  CHECK(numbers == range(30));
  CHECK(epoch(processes) == expected);
}

}  // namespace
