#pragma once
/// \file
/// `fullsync(timeout)` (torchdata's FullSync): keeps every rank of a distributed job in step, so
/// that all ranks stop an epoch after the same number of elements, the least any rank has. It is
/// not replicable: under a multiprocessing reading service it stays in the main process, on top
/// of the merged workers. Without a distributed reading service (a world of one) it passes its
/// elements through.
///
/// Under DistributedReadingService it agrees with the other ranks in rounds instead of per
/// element: before a round it reads a block of elements ahead (1 in the first round of an epoch,
/// doubling up to the service's `fullsync_block`), tells the others how many it has, and hands
/// out up to the least count of all ranks. The store therefore sees one request per rank per
/// block, and a rank holds at most one block. A rank whose source throws tells the others before
/// it rethrows; their fullsync raises RendezvousError naming it.
///
/// Checkpoint state: the epoch and round, the elements handed out and agreed, and the elements
/// read ahead.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/adaptor.hpp>
#include <dpipe/core/capabilities.hpp>
#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/detail/iteration_local.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/type_name.hpp>

namespace dpipe::iter {

template <class T>
class FullSync final : public IterDataPipe<T>, public RankSyncDataPipe {
 public:
  static constexpr std::string_view kName = "fullsync";

  FullSync(const IterPipe<T>& source, std::chrono::milliseconds timeout)
      : IterDataPipe<T>(std::string(kName)), source_(source.ptr()), timeout_(timeout) {
    if (timeout <= std::chrono::milliseconds(0)) {
      DPIPE_THROW(InvalidArgument, "fullsync: the timeout must be positive, got {} ms", timeout.count());
    }
    this->set_replicable(false);
  }

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<FullSync>(*this); }

  void join_ranks(std::shared_ptr<RankSync> sync) override { sync_ = std::move(sync); }

  /// How long a rank waits for the others in a round before failing.
  [[nodiscard]] std::chrono::milliseconds timeout() const noexcept { return timeout_; }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("epoch", epoch_);
    writer.write("round", round_);
    writer.write("yielded", yielded_);
    writer.write("bound", bound_);
    writer.write("ended", ended_);
    writer.write("source_ended", source_ended_);
    writer.write("block", std::uint64_t{block_});
    detail::write_elements<T>(writer, "ahead", *this, std::span<const T>(*ahead_).subspan(head_));
    return true;
  }

  void load_state(const StateReader& reader) override {
    epoch_ = reader.read<std::uint64_t>("epoch");
    round_ = reader.read<std::uint64_t>("round");
    yielded_ = reader.read<std::uint64_t>("yielded");
    bound_ = reader.read<std::uint64_t>("bound");
    ended_ = reader.read<bool>("ended");
    source_ended_ = reader.read<bool>("source_ended");
    block_ = reader.read<std::uint64_t>("block");
    ahead_ = detail::read_elements<T>(reader, "ahead", *this);
    head_ = 0;
    if (bound_ < yielded_ || bound_ - yielded_ > ahead_->size()) {
      DPIPE_THROW(StateError, "{}: the state agrees on {} elements after {} handed out, but holds {}", this->label(),
                  bound_, yielded_, ahead_->size());
    }
  }

 protected:
  void reset_impl() override {
    source_.reset();
    ++epoch_;
    round_ = 0;
    yielded_ = 0;
    bound_ = 0;
    ended_ = false;
    source_ended_ = false;
    block_ = 1;
    ahead_->clear();
    head_ = 0;
  }

  std::optional<T> next_impl() override {
    if (!sync_) return source_.next();
    if (!agreed_more()) return std::nullopt;
    ++yielded_;
    return std::move((*ahead_)[head_++]);
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    if (!sync_) return source_.pull(out, n);
    std::size_t produced = 0;
    while (produced < n && agreed_more()) {
      const std::size_t take = std::min<std::uint64_t>(n - produced, bound_ - yielded_);
      for (std::size_t i = 0; i < take; ++i) out.push_back(std::move((*ahead_)[head_++]));
      yielded_ += take;
      produced += take;
    }
    return produced;
  }

  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    if (sync_) return std::nullopt;  // the least of all ranks, known only as the epoch runs
    return source_.length();
  }

 private:
  /// Whether the ranks agreed on an element past those handed out, running rounds until they do
  /// or until the epoch ends.
  bool agreed_more() {
    while (yielded_ == bound_) {
      if (ended_) return false;
      run_round();
    }
    return true;
  }

  /// Reads the next block ahead and agrees with the other ranks on how far everyone can go.
  void run_round() {
    ahead_->erase(ahead_->begin(), ahead_->begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
    if (!source_ended_ && ahead_->size() < block_) {
      const std::size_t wanted = block_ - ahead_->size();
      try {
        source_ended_ = source_.pull(*ahead_, wanted) < wanted;
      } catch (...) {
        sync_->fail(epoch_, round_, detail::describe(std::current_exception()));
        throw;
      }
    }
    block_ = std::min(block_ * 2, std::max<std::size_t>(sync_->max_block(), 1));
    const auto agreement = sync_->agree(epoch_, round_, yielded_ + ahead_->size(), source_ended_, timeout_);
    ++round_;
    bound_ = agreement.bound;
    ended_ = agreement.ended;
  }

  Input<T> source_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<RankSync> sync_;
  std::uint64_t epoch_ = 0;   // counts this node's epochs: with `round_`, names the round for all ranks
  std::uint64_t round_ = 0;   // the next round of this epoch
  std::uint64_t yielded_ = 0;  // elements handed out this epoch
  std::uint64_t bound_ = 0;    // elements every rank can hand out, as agreed so far
  bool ended_ = false;         // the epoch ends at bound_
  bool source_ended_ = false;
  std::size_t block_ = 1;      // elements to hold after the next round's read
  detail::IterationLocal<std::vector<T>> ahead_;  // read ahead, from head_ on
  std::size_t head_ = 0;
};

}  // namespace dpipe::iter

namespace dpipe {

template <class T>
IterPipe<T> IterPipe<T>::fullsync(std::chrono::milliseconds timeout) const {
  return make_iter<iter::FullSync<T>>(*this, timeout);
}

}  // namespace dpipe

namespace dpipe::iter {

/// `src | iter::fullsync(timeout)`.
[[nodiscard]] inline auto fullsync(std::chrono::milliseconds timeout = std::chrono::seconds(1800)) {
  return PipeAdaptor{[=](const auto& source) { return source.fullsync(timeout); }};
}

}  // namespace dpipe::iter
