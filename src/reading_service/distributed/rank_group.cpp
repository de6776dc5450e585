// RankGroup and the fullsync agreement over its store.

#include "reading_service/distributed/rank_group.hpp"

#include <algorithm>
#include <utility>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/distributed/tcp_store.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe::detail::dist {
namespace {

/// What a rank tells the others in a fullsync round.
struct Progress {
  bool failed = false;
  std::uint64_t available = 0;  // elements it can hand out this epoch, in all
  bool ended = false;           // and no more
  std::string reason;           // why it failed
  DPIPE_FIELDS(failed, available, ended, reason)
};

/// Decodes rank `rank`'s value of a round, refusing bytes no dpipe rank would send.
template <class T>
T decode(const std::vector<std::byte>& bytes, std::size_t rank, const RankGroup& group, const std::string& what) {
  try {
    return from_bytes<T>(bytes);
  } catch (const SerializationError& error) {
    DPIPE_THROW(RendezvousError,
                "DistributedReadingService ({}): {}: rank {} sent a value this dpipe cannot read ({}; another version "
                "of dpipe, or another program, on that rank?)",
                group.where(), what, rank, error.what());
  }
}

/// The agreement of one fullsync node of the graph, in rounds over the group's store.
class StoreRankSync final : public RankSync {
 public:
  StoreRankSync(std::shared_ptr<RankGroup> group, std::size_t index, std::size_t max_block)
      : group_(std::move(group)), index_(index), max_block_(max_block) {}

  std::optional<Agreement> exchange(std::optional<Count> post, std::optional<Round> collect,
                                    std::chrono::milliseconds timeout) override {
    const std::string what = describe(collect ? *collect : post->round);
    const auto values =
        group_->exchange(post ? key(post->round) : std::string(),
                         post ? to_bytes(Progress{false, post->available, post->ended, {}}) : std::vector<std::byte>{},
                         collect ? key(*collect) : std::string(), timeout, what);
    if (!collect) return std::nullopt;
    std::optional<Agreement> agreement;
    for (std::size_t rank = 0; rank < values.size(); ++rank) {
      const auto progress = decode<Progress>(values[rank], rank, *group_, what);
      if (progress.failed) {
        DPIPE_THROW(RendezvousError, "DistributedReadingService ({}): {}: rank {} failed: {}", group_->where(), what,
                    rank, progress.reason);
      }
      if (!agreement || progress.available < agreement->bound) agreement = Agreement{progress.available, false};
      if (progress.available == agreement->bound) agreement->ended = agreement->ended || progress.ended;
    }
    return agreement;
  }

  void fail(Round round, const std::string& reason) noexcept override {
    group_->post(key(round), to_bytes(Progress{true, 0, true, reason}));
  }

  [[nodiscard]] std::size_t max_block() const noexcept override { return max_block_; }

  void check_ranks() const override { group_->check_departures(); }

 private:
  [[nodiscard]] std::string key(Round round) const {
    return fmt::format("fullsync{}/{}/{}", index_, round.epoch, round.number);
  }
  [[nodiscard]] std::string describe(Round round) const {
    if (index_ == 0) return fmt::format("fullsync round {} of its epoch {}", round.number, round.epoch);
    return fmt::format("fullsync#{} round {} of its epoch {}", index_, round.number, round.epoch);
  }

  std::shared_ptr<RankGroup> group_;
  std::size_t index_;
  std::size_t max_block_;
};

}  // namespace

RankGroup::RankGroup(LaunchEnvironment environment, const DistributedOptions& options, std::string prefix,
                     RunIdentity identity)
    : environment_(std::move(environment)),
      where_(fmt::format("rank {} of {}", environment_.rank, environment_.world_size)),
      timeout_(options.timeout),
      fullsync_block_(options.fullsync_block),
      identity_(std::move(identity)) {
  if (environment_.world_size == 1) return;
  if (options.store) {
    store_ = std::make_unique<PrefixStore>(options.store, "dpipe/" + prefix);
    return;
  }
  tcp_options_.host = environment_.store_host;
  tcp_options_.port = environment_.store_port;
  tcp_options_.serve = environment_.rank == 0;
  tcp_options_.token = environment_.token;
  tcp_options_.timeout = options.timeout;
  tcp_options_.rank = environment_.rank;
  tcp_options_.member = std::move(prefix);
  tcp_options_.world_size = environment_.world_size;
  tcp_options_.fingerprint = identity_.pipeline + "-" + identity_.service;
  tcp_options_.stall_warning = options.stall_warning;
  tcp_options_.on_departure = [this](const std::string& why) {
    const std::lock_guard lock(departure_mutex_);
    if (departed_.load()) return;
    departure_ = why;
    departed_.store(true);
  };
  where_ += fmt::format(" under {}, rank 0 serving the store at {}:{}", launcher_name(environment_.launcher),
                        environment_.store_host, environment_.store_port);
}

void RankGroup::connect(std::optional<std::chrono::milliseconds> patience) {
  if (store_ || left_) return;
  try {
    TcpStoreOptions options = tcp_options_;
    if (patience) options.timeout = std::min(options.timeout, *patience);
    tcp_ = std::make_shared<TcpStore>(options);
    tcp_->set_timeout(tcp_options_.timeout);
  } catch (const Error& error) {
    DPIPE_THROW(RendezvousError, "DistributedReadingService ({}): cannot meet the other ranks: {}", where_,
                error.what());
  }
  store_ = std::make_unique<PrefixStore>(tcp_, tcp_options_.member);
}

RankGroup::~RankGroup() { leave(); }

std::uint64_t RankGroup::share_seed(std::uint64_t own, std::uint64_t epoch) {
  if (environment_.world_size == 1) return own;
  const std::string what = fmt::format("sharing rank 0's seed of epoch round {}", epoch);
  const std::string round = fmt::format("seed/{}", epoch);
  const auto values = exchange(round, to_bytes(own), round, timeout_, what);
  return decode<std::uint64_t>(values.front(), 0, *this, what);
}

template <class Call>
auto RankGroup::on_store(const std::string& what, std::chrono::milliseconds timeout, Call call) {
  const std::lock_guard lock(mutex_);
  connect();
  if (!store_) {
    DPIPE_THROW(UsageError, "DistributedReadingService ({}): {}: the loader left the job (it was shut down)", where_,
                what);
  }
  if (!std::exchange(met_, true)) meet();
  return on_store_locked(what, timeout, std::move(call));
}

template <class Call>
auto RankGroup::on_store_locked(const std::string& what, std::chrono::milliseconds timeout, Call call) {
  const auto previous = store_->timeout();
  if (timeout != previous) store_->set_timeout(timeout);
  try {
    auto result = call(*store_);
    if (timeout != previous) store_->set_timeout(previous);
    return result;
  } catch (const Error& error) {
    if (timeout != previous) store_->set_timeout(previous);
    DPIPE_THROW(RendezvousError, "DistributedReadingService ({}): {}: {}", where_, what, error.what());
  }
}

namespace {

std::string describe(const RunIdentity& identity) {
  return fmt::format("starts epoch round {} {}, pipeline fingerprint {}, service fingerprint {}", identity.epoch,
                     identity.restored ? "restored from a checkpoint" : "fresh", identity.pipeline, identity.service);
}

}  // namespace

void RankGroup::restored(std::uint64_t epochs) {
  identity_.epoch = epochs;
  identity_.restored = true;
}

void RankGroup::meet() {
  const std::string what = "meeting the other ranks";
  const auto values = on_store_locked(what, timeout_, [&](Store& store) {
    return store.exchange("run", to_bytes(identity_), "run", environment_.rank, environment_.world_size);
  });
  const auto first = decode<RunIdentity>(values.front(), 0, *this, what);
  for (std::size_t rank = 1; rank < values.size(); ++rank) {
    const auto other = decode<RunIdentity>(values[rank], rank, *this, what);
    if (other != first) {
      DPIPE_THROW(RendezvousError,
                  "DistributedReadingService ({}): the ranks disagree about what they run: rank 0 {}; rank {} {} (a "
                  "checkpoint of every rank restores them together; every rank builds the same pipeline and "
                  "options)",
                  where_, describe(first), rank, describe(other));
    }
  }
}

void RankGroup::check_departures() const {
  if (!departed_.load(std::memory_order_relaxed)) return;
  const std::lock_guard lock(departure_mutex_);
  DPIPE_THROW(RendezvousError, "DistributedReadingService ({}): {}", where_, departure_);
}

std::shared_ptr<RankSync> RankGroup::fullsync(std::size_t index) {
  if (environment_.world_size == 1) return nullptr;
  return std::make_shared<StoreRankSync>(shared_from_this(), index, std::max<std::size_t>(fullsync_block_, 1));
}

void RankGroup::leave() noexcept {
  const std::lock_guard lock(mutex_);
  left_ = true;
  if (tcp_) tcp_->leave();
  store_.reset();
  tcp_.reset();
}

std::vector<std::vector<std::byte>> RankGroup::exchange(const std::string& post, std::span<const std::byte> value,
                                                        const std::string& collect, std::chrono::milliseconds timeout,
                                                        const std::string& what) {
  return on_store(what, timeout, [&](Store& store) {
    return store.exchange(post, value, collect, environment_.rank, environment_.world_size);
  });
}

void RankGroup::put(const std::string& key, std::span<const std::byte> value, const std::string& what) {
  on_store(what, timeout_, [&](Store& store) {
    store.set(key, value);
    return true;
  });
}

std::vector<std::byte> RankGroup::take(const std::string& key, const std::string& what) {
  return on_store(what, timeout_, [&](Store& store) {
    auto value = store.get(key);
    store.remove(key);
    return value;
  });
}

void RankGroup::post(const std::string& round, std::span<const std::byte> value) noexcept {
  // A failing rank tells the others and goes on failing: it waits for the store a moment at most.
  constexpr std::chrono::milliseconds kPatience(2000);
  try {
    const std::lock_guard lock(mutex_);
    connect(kPatience);
    if (!store_) return;
    const auto previous = store_->timeout();
    store_->set_timeout(std::min(previous, kPatience));
    try {
      store_->exchange(round, value, {}, environment_.rank, environment_.world_size);
    } catch (const std::exception&) {
      // The store is gone: the other ranks learn of this rank from it (its connection closes).
    }
    store_->set_timeout(previous);
  } catch (const std::exception&) {
    // Not even connected: the others learn of this rank at their timeout.
  }
}

}  // namespace dpipe::detail::dist
