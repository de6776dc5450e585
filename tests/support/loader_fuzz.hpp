#pragma once
// Feeds hostile checkpoints to fresh loaders: corruptions of the fields behind a valid checksum (see
// corruption.hpp).

#include <cstdint>
#include <random>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/corruption.hpp"
#include "support/loader.hpp"

namespace dpipe::testing {

struct FuzzOutcome {
  int refused = 0;   // StateError, or a WorkerError carrying the StateError of a child process
  int restored = 0;  // loaded and ran to the end of its epoch
};

/// Loads `rounds` corruptions of `blob` (random seed `seed`) into loaders from `make()`. Each must
/// be refused or restore a loader that finishes its epoch; any other exception fails the test.
template <class Make>
FuzzOutcome fuzz_resealed(const std::vector<std::byte>& blob, std::uint64_t seed, int rounds, const Make& make) {
  std::mt19937_64 random(seed);
  FuzzOutcome outcome;
  for (int round = 0; round < rounds; ++round) {
    const auto bytes = corrupt_resealed(blob, random);
    auto target = make();
    try {
      target.load_state_dict(bytes);
      (void)epoch(target);
      ++outcome.restored;
    } catch (const StateError&) {
      ++outcome.refused;
    } catch (const WorkerError& error) {
      INFO(error.what());
      CHECK(error.original_type() == "dpipe::StateError");
      ++outcome.refused;
    }
  }
  return outcome;
}

}  // namespace dpipe::testing
