#pragma once
/// \file
/// `samples | dpipe::iter::tensor_batch(256, dpipe::tensor_collate<Sample>())`: batch(256) and
/// collate(tensor_collate<Sample>()) in one node, with the same batches, lengths and errors. It
/// copies each sample into the batch's buffers as soon as it is pulled, instead of holding the
/// batch's samples until the last one arrives: a batch of large samples then never holds them
/// all at once, and each is copied while it is still in the caches (B10: the samples of a batch
/// of 256 images take 38.5 MB, past a CPU's caches). A collate that pads a field needs the
/// batch's longest row first: this node then gathers the rows and collates them, as the two nodes
/// would.
///
/// Like batch(), it never reads ahead of the batch it returns (stateless). When a row differs
/// from the first, it reads the rest of the batch's rows before it throws, so that the next batch
/// starts where batch()'s would (a short last batch with drop_last is dropped unread, without an
/// error, as batch() drops it). It allocates a batch's tensors for `batch_size` rows at its first
/// row: a short last batch keeps that buffer.

#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/detail/checks.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/tensor/tensor_collate.hpp>

namespace dpipe::iter {

template <has_fields S>
class TensorBatcher final : public IterDataPipe<TensorBatch<S>> {
 public:
  static constexpr std::string_view kName = "tensor_batch";
  /// The samples pulled at a time: about this many bytes of them (at least one, at most
  /// kMaxChunkRows), so that they stay in a core's cache until they are copied in.
  static constexpr std::size_t kChunkBytes = std::size_t{256} << 10;
  static constexpr std::size_t kMaxChunkRows = 64;

  TensorBatcher(const IterPipe<S>& source, std::size_t batch_size, TensorCollate<S> collate, bool drop_last)
      : IterDataPipe<TensorBatch<S>>(std::string(kName)),
        source_(source.ptr()),
        shape_(batch_size, drop_last),
        collate_(std::move(collate)) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<TensorBatcher>(*this); }
  [[nodiscard]] NodeSettings settings() const override { return shape_.settings(); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }

  [[nodiscard]] std::size_t batch_size() const noexcept { return shape_.size; }
  [[nodiscard]] bool drop_last() const noexcept { return shape_.drop_last; }

 protected:
  std::optional<TensorBatch<S>> next_impl() override {
    const std::size_t size = shape_.size;
    if (collate_.pads()) {
      std::vector<S> rows;
      rows.reserve(size);
      const std::size_t got = source_.pull(rows, size);
      if (got == 0 || (got < size && shape_.drop_last)) return std::nullopt;
      return collate_(rows);
    }
    typename TensorCollate<S>::Stacker stacker(collate_, size);
    std::vector<S> chunk;
    std::size_t pulled = 0;
    while (pulled < size) {
      chunk.clear();
      const std::size_t wanted = std::min(size - pulled, chunk_rows_);
      const std::size_t got = source_.pull(chunk, wanted);
      pulled += got;
      try {
        for (const S& row : chunk) stacker.add(row);
      } catch (...) {
        // batch() would have taken the whole batch first, and dropped a short one unread.
        const std::size_t skipped = skip(size - pulled);
        if (shape_.drop_last && pulled + skipped < size) return std::nullopt;
        throw;
      }
      if (got < wanted) break;
      chunk_rows_ =
          std::clamp<std::size_t>(kChunkBytes / std::max<std::size_t>(stacker.row_bytes(), 1), 1, kMaxChunkRows);
    }
    if (pulled == 0 || (pulled < size && shape_.drop_last)) return std::nullopt;
    return stacker.finish();
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    const auto source_length = source_.length();
    if (!source_length) return std::nullopt;
    return shape_.count(*source_length);
  }

 private:
  /// Reads and drops up to `count` more rows; returns how many there were.
  std::size_t skip(std::size_t count) {
    std::vector<S> rows;
    std::size_t skipped = 0;
    while (skipped < count) {
      rows.clear();
      const std::size_t wanted = std::min(count - skipped, kMaxChunkRows);
      const std::size_t got = source_.pull(rows, wanted);
      skipped += got;
      if (got < wanted) break;
    }
    return skipped;
  }

  Input<S> source_;
  detail::BatchShape shape_;
  TensorCollate<S> collate_;
  std::size_t chunk_rows_ = 1;  // until a row's size is known
};

/// `samples | dpipe::iter::tensor_batch(batch_size, dpipe::tensor_collate<Sample>(), drop_last)`.
template <has_fields S>
[[nodiscard]] auto tensor_batch(std::size_t batch_size, TensorCollate<S> collate, bool drop_last = false) {
  return PipeAdaptor{[batch_size, collate = std::move(collate), drop_last](const IterPipe<S>& source) {
    return make_iter<TensorBatcher<S>>(source, batch_size, collate, drop_last);
  }};
}

}  // namespace dpipe::iter
