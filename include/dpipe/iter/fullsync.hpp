#pragma once
/// \file
/// `fullsync(timeout)` (torchdata's FullSync): keeps every rank of a distributed job in step, so
/// that all ranks stop an epoch after the same number of elements, the least any rank has. It is
/// not replicable: under a multiprocessing reading service it stays in the main process, on top
/// of the merged workers. Without a distributed reading service (a world of one) it passes its
/// elements through.
///
/// Under DistributedReadingService it agrees with the other ranks in rounds instead of per
/// element, and a round ahead: each time it has handed out what the ranks agreed on, it reads a
/// block of elements ahead (1 at the start of an epoch, doubling up to the service's
/// `fullsync_block`), tells the others how many it holds now and learns what they told in the
/// round before, in one request. A rank therefore waits only for a rank a whole block behind,
/// the store sees one request per rank per block, and a rank holds at most two blocks. A rank
/// whose source throws tells the others before it rethrows; their fullsync raises
/// RendezvousError naming it. A rank whose process dies is named at once, at the next element
/// the others hand out (RankSync::check_ranks), not at their next round.
///
/// Checkpoint state: the epoch and round, the elements handed out and agreed, the last counts it
/// posted, and the elements read ahead. A restore posts those counts again, to the store of the
/// new job, so that ranks whose checkpoints stand a few rounds apart (a prefetch after fullsync
/// reads ahead on each rank at its own pace) still find every count they collect.

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

  void join_ranks(std::shared_ptr<RankSync> sync) override {
    sync_ = std::move(sync);
    joined_ = true;
  }
  [[nodiscard]] bool joined() const noexcept override { return joined_; }

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
    std::vector<std::uint64_t> rounds;
    std::vector<std::uint64_t> available;
    std::vector<std::uint8_t> ended;
    for (const auto& count : recent_) {
      rounds.push_back(count.round.number);
      available.push_back(count.available);
      ended.push_back(count.ended ? 1 : 0);
    }
    writer.write("posted_rounds", rounds);
    writer.write("posted_available", available);
    writer.write("posted_ended", ended);
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
    const auto rounds = reader.read<std::vector<std::uint64_t>>("posted_rounds");
    const auto available = reader.read<std::vector<std::uint64_t>>("posted_available");
    const auto ended = reader.read<std::vector<std::uint8_t>>("posted_ended");
    if (available.size() != rounds.size() || ended.size() != rounds.size() || rounds.size() > kRecent) {
      DPIPE_THROW(StateError, "{}: the state's posted counts do not fit together", this->label());
    }
    recent_.clear();
    for (std::size_t i = 0; i < rounds.size(); ++i) {
      recent_.push_back(RankSync::Count{{epoch_, rounds[i]}, available[i], ended[i] != 0});
    }
    ahead_ = detail::read_elements<T>(reader, "ahead", *this);
    head_ = 0;
    repost_ = !recent_.empty();
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
    recent_.clear();
    repost_ = false;
    ahead_->clear();
    head_ = 0;
  }

  std::optional<T> next_impl() override {
    if (!sync_) return source_.next();
    sync_->check_ranks();
    if (!agreed_more()) return std::nullopt;
    ++yielded_;
    return std::move((*ahead_)[head_++]);
  }

  std::size_t pull_impl(std::vector<T>& out, std::size_t n) override {
    if (!sync_) return source_.pull(out, n);
    sync_->check_ranks();
    std::size_t produced = 0;
    while (produced < n && agreed_more()) {
      const std::size_t take = std::min<std::uint64_t>(n - produced, bound_ - yielded_);
      for (std::size_t i = 0; i < take; ++i) out.push_back(std::move((*ahead_)[head_++]));
      yielded_ += take;
      produced += take;
    }
    return produced;
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

  /// Reads the next block ahead, posts how many this rank holds now, and collects the round
  /// posted before (the first round of an epoch has none: it takes two rounds to agree). The last
  /// round an epoch posts is never collected; the store keeps it (a few bytes per rank).
  void run_round() {
    if (std::exchange(repost_, false)) {
      for (const auto& count : recent_) (void)sync_->exchange(count, std::nullopt, timeout_);  // a new store
    }
    ahead_->erase(ahead_->begin(), ahead_->begin() + static_cast<std::ptrdiff_t>(head_));
    head_ = 0;
    const RankSync::Round round{epoch_, round_};
    if (!source_ended_) {
      try {
        source_ended_ = source_.pull(*ahead_, block_) < block_;
      } catch (...) {
        sync_->fail(round, detail::describe(std::current_exception()));
        throw;
      }
      block_ = std::min(block_ * 2, std::max<std::size_t>(sync_->max_block(), 1));
    }
    const RankSync::Count count{round, yielded_ + ahead_->size(), source_ended_};
    std::optional<RankSync::Round> collect;
    if (!recent_.empty()) collect = recent_.back().round;
    const auto agreement = sync_->exchange(count, collect, timeout_);
    if (recent_.size() == kRecent) recent_.erase(recent_.begin());
    recent_.push_back(count);
    ++round_;
    if (!agreement) return;
    bound_ = agreement->bound;
    ended_ = agreement->ended;
  }

  /// The counts a restore posts again.
  static constexpr std::size_t kRecent = 8;

  Input<T> source_;
  std::chrono::milliseconds timeout_;
  std::shared_ptr<RankSync> sync_;
  std::uint64_t epoch_ = 0;   // counts this node's epochs: with `round_`, names the round for all ranks
  std::uint64_t round_ = 0;   // the next round to post this epoch
  std::uint64_t yielded_ = 0;  // elements handed out this epoch
  std::uint64_t bound_ = 0;    // elements every rank can hand out, as agreed so far
  bool ended_ = false;         // the epoch ends at bound_
  bool source_ended_ = false;
  std::size_t block_ = 1;                   // elements the next round reads ahead
  std::vector<RankSync::Count> recent_;  // the last counts posted this epoch, the newest not collected yet
  bool repost_ = false;                   // restored: post recent_ again, to the new job's store
  bool joined_ = false;                   // a distributed service joined it (a world of one too)
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
