#pragma once
/// \file
/// Argument checks several nodes share, with torchdata's messages.

#include <cstddef>

#include <dpipe/core/error.hpp>

namespace dpipe::detail {

/// batch, map_batches, bucketbatch and map-style batch.
inline void require_batch_size(std::size_t batch_size) {
  if (batch_size == 0) DPIPE_THROW(InvalidArgument, "Batch size is required to be larger than 0!");
}

/// fork and demux.
inline void require_instances(std::size_t num_instances) {
  if (num_instances < 1) {
    DPIPE_THROW(InvalidArgument, "Expected `num_instances` larger than 0, but {} is found", num_instances);
  }
}

}  // namespace dpipe::detail
