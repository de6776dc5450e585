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
  int refused = 0;   // load_state_dict threw StateError
  int restored = 0;  // loaded and ran to the end of its epoch
};

/// Loads `rounds` corruptions of `blob` (random seed `seed`) into loaders from `make()`. Each must
/// be refused by load_state_dict() with StateError, whichever process holds the corrupt part, or
/// restore a loader that finishes its epoch; any other exception fails the test.
template <class Make>
FuzzOutcome fuzz_resealed(const std::vector<std::byte>& blob, std::uint64_t seed, int rounds, const Make& make) {
  std::mt19937_64 random(seed);
  FuzzOutcome outcome;
  for (int round = 0; round < rounds; ++round) {
    const auto bytes = corrupt_resealed(blob, random);
    auto target = make();
    try {
      target.load_state_dict(bytes);
    } catch (const StateError&) {
      ++outcome.refused;
      continue;
    }
    (void)epoch(target);
    ++outcome.restored;
  }
  return outcome;
}

}  // namespace dpipe::testing
