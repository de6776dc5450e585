#pragma once
/// \file
/// `bucketbatch(batch_size, drop_last, batch_num, bucket_num, sort_key, use_in_batch_shuffle)`
/// (torchdata's BucketBatcher): not a node of its own but torchdata's composition of nodes. Pools of
/// batch_size * batch_num * bucket_num elements are shuffled (in_batch_shuffle, or shuffle), cut
/// into buckets of batch_size * batch_num that `sort_key` may order (say, by length), batched, and,
/// with a sort_key, the batches of each pool shuffled again. The random nodes are seeded by the
/// loader like any other.

#include <functional>
#include <vector>

#include <dpipe/core/detail/checks.hpp>
#include <dpipe/iter/batch.hpp>
#include <dpipe/iter/flatmap.hpp>
#include <dpipe/iter/in_batch_shuffle.hpp>
#include <dpipe/iter/map.hpp>
#include <dpipe/iter/shuffle.hpp>

namespace dpipe {

template <class T>
IterPipe<std::vector<T>> IterPipe<T>::bucketbatch(std::size_t batch_size, bool drop_last, std::size_t batch_num,
                                                  std::size_t bucket_num,
                                                  std::function<std::vector<T>(std::vector<T>)> sort_key,
                                                  bool use_in_batch_shuffle) const {
  detail::require_batch_size(batch_size);
  if (batch_num == 0) DPIPE_THROW(InvalidArgument, "Number of batches is required to be larger than 0!");
  if (bucket_num == 0) DPIPE_THROW(InvalidArgument, "Number of buckets is required to be larger than 0!");
  const std::size_t bucket_size = batch_size * batch_num;
  const std::size_t pool_size = bucket_size * bucket_num;
  IterPipe<T> pipe = *this;
  if (bucket_num > 1 || !sort_key) {
    pipe = use_in_batch_shuffle ? pipe.batch(pool_size).in_batch_shuffle().unbatch() : pipe.shuffle(pool_size);
  }
  if (sort_key) pipe = pipe.batch(bucket_size).map(sort_key).unbatch();
  IterPipe<std::vector<T>> batches = pipe.batch(batch_size, drop_last);
  if (sort_key) {
    batches =
        use_in_batch_shuffle ? batches.batch(bucket_num).in_batch_shuffle().unbatch() : batches.shuffle(bucket_size);
  }
  return batches;
}

namespace iter {

/// `src | iter::bucketbatch(batch_size, ...)`.
template <class... Args>
[[nodiscard]] auto bucketbatch(std::size_t batch_size, Args... args) {
  return PipeAdaptor{[=](const auto& source) { return source.bucketbatch(batch_size, args...); }};
}

}  // namespace iter
}  // namespace dpipe
