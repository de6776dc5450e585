#pragma once
/// \file
/// Which vector code IndexPermutation::indices runs: the CPU's best by default; tests run each
/// one the CPU has. Private to dpipe.

#include <cstdint>

namespace dpipe {

/// The instruction sets IndexPermutation::indices has code for.
enum class VectorCode : std::uint8_t { kBest, kBaseline, kAvx2, kAvx512 };

/// Makes IndexPermutation::indices run `code`, or the best below it the CPU has (kBest: the
/// CPU's best, the default); returns the code it runs. For tests. Thread-safety: any thread, but
/// it changes what every thread runs.
VectorCode set_vector_code(VectorCode code) noexcept;

}  // namespace dpipe
