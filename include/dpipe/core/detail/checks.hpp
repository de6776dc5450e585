#pragma once
/// \file
/// Argument checks several nodes share, with torchdata's messages.

#include <cstddef>
#include <string>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/error.hpp>

namespace dpipe::detail {

/// batch, map_batches, bucketbatch and map-style batch.
inline void require_batch_size(std::size_t batch_size) {
  if (batch_size == 0) DPIPE_THROW(InvalidArgument, "Batch size is required to be larger than 0!");
}

/// The shape of the batches of `batch` (iter and map): `size` elements each (InvalidArgument when
/// 0), and whether a short last batch is dropped.
struct BatchShape {
  BatchShape(std::size_t batch_size, bool drop_short_last) : size(batch_size), drop_last(drop_short_last) {
    require_batch_size(batch_size);
  }
  /// How many batches `n` elements make.
  [[nodiscard]] std::size_t count(std::size_t n) const noexcept {
    return n / size + (!drop_last && n % size != 0 ? 1 : 0);
  }

  /// The shape as node settings (DataPipe::settings()).
  [[nodiscard]] NodeSettings settings() const {
    return {{"batch_size", std::to_string(size)}, {"drop_last", drop_last ? "true" : "false"}};
  }

  std::size_t size;
  bool drop_last;
};

/// fork and demux.
inline void require_instances(std::size_t num_instances) {
  if (num_instances < 1) {
    DPIPE_THROW(InvalidArgument, "Expected `num_instances` larger than 0, but {} is found", num_instances);
  }
}

}  // namespace dpipe::detail
