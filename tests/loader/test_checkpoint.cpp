// Exact checkpoints in process (SPEC §9): for every position k, a loader restored from the state
// saved after k elements yields the rest of the uninterrupted epoch, then the same next epoch;
// restoring does not replay; bad blobs are refused with StateError.

#include <atomic>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::InProcessReadingService;
using dpipe::testing::range;

using Batch = std::vector<int>;
using Counter = std::shared_ptr<std::atomic<int>>;

/// Pipelines mixing shuffle, sharding_filter, batch, fork + zip, prefetch and threadpool_map. The
/// counter counts source reads.
dpipe::IterPipe<Batch> make_pipeline(int which, const Counter& reads) {
  auto source = iter::from(range(180)).map([reads](int x) {
    reads->fetch_add(1);
    return x;
  });
  switch (which) {
    case 0:
      return source.shuffle(16).sharding_filter().map([](int x) { return x * 3; }).batch(4);
    case 1: {
      auto forks = source.shuffle(8).enumerate().fork(2, 64);
      return forks[0]
          .map([](auto pair) { return static_cast<int>(pair.first); })
          .zip(forks[1].map([](auto pair) { return pair.second; }))
          .map([](auto pair) { return std::get<0>(pair) * 1000 + std::get<1>(pair); })
          .prefetch(5)
          .batch(3);
    }
    default:
      return source.threadpool_map([](int x) { return x * x; }, 2, 6).shuffle(10).sharding_filter().batch(5);
  }
}

std::vector<Batch> drain(DataLoader2<Batch>& loader) {
  std::vector<Batch> out;
  for (auto& batch : loader) out.push_back(batch);
  return out;
}

TEST_CASE("checkpoint: restored at every position it continues exactly / the next epoch too", "[loader][checkpoint]") {
  for (const bool with_service : {true, false}) {
    for (int which = 0; which < 3; ++which) {
      INFO("pipeline " << which << (with_service ? " with InProcessReadingService(3)" : " without a service"));
      const auto make_loader = [&] {
        auto reads = std::make_shared<std::atomic<int>>(0);
        auto pipe = make_pipeline(which, reads);
        return with_service ? DataLoader2<Batch>(pipe, InProcessReadingService(3)) : DataLoader2<Batch>(pipe);
      };
      auto reference = make_loader();
      reference.seed(7);
      const auto first = drain(reference);
      const auto second = drain(reference);
      REQUIRE(first.size() > 10);
      for (std::size_t k = 0; k <= first.size(); ++k) {
        INFO("saved after " << k << " batches");
        std::vector<std::byte> state;
        {
          auto loader = make_loader();
          loader.seed(7);
          std::size_t taken = 0;
          auto it = loader.begin();
          for (; taken < k && it != loader.end(); ++it) ++taken;
          if (k == first.size()) CHECK(it == loader.end());  // the epoch is over
          state = loader.state_dict();
        }  // the loader that saved is gone
        auto restored = make_loader();
        restored.load_state_dict(state);
        const auto rest = drain(restored);
        if (k == first.size()) {
          CHECK(rest == second);  // saved after the epoch ended: the next iteration is the next epoch
        } else {
          CHECK(rest == std::vector<Batch>(first.begin() + static_cast<std::ptrdiff_t>(k), first.end()));
          CHECK(drain(restored) == second);
        }
      }
    }
  }
}

TEST_CASE("checkpoint: restoring does not replay the epoch", "[loader][checkpoint]") {
  auto reads = std::make_shared<std::atomic<int>>(0);
  DataLoader2<Batch> loader(make_pipeline(0, reads), InProcessReadingService(3));
  loader.seed(1);
  std::size_t taken = 0;
  std::vector<std::byte> state;
  for (auto& batch : loader) {
    (void)batch;
    if (++taken == 40) {
      state = loader.state_dict();
      break;
    }
  }
  REQUIRE(reads->load() >= 160);
  auto restored_reads = std::make_shared<std::atomic<int>>(0);
  DataLoader2<Batch> restored(make_pipeline(0, restored_reads), InProcessReadingService(3));
  restored.load_state_dict(state);
  CHECK(drain(restored).size() == 45 - 40);
  CHECK(restored_reads->load() <= 180 - 160 + 16);  // the rest of the source, not the epoch again
}

TEST_CASE("checkpoint: state_dict before iterating / and after loading / returns what was loaded",
          "[loader][checkpoint]") {
  DataLoader2<int> fresh(iter::from(range(5)).shuffle());
  fresh.seed(3);
  const auto before = fresh.state_dict();
  DataLoader2<int> restored(iter::from(range(5)).shuffle());
  restored.load_state_dict(before);
  CHECK(restored.state_dict() == before);
  DataLoader2<int> reference(iter::from(range(5)).shuffle());
  reference.seed(3);
  std::vector<int> expected;
  for (int x : reference) expected.push_back(x);
  std::vector<int> got;
  for (int x : restored) got.push_back(x);
  CHECK(got == expected);  // the seed travelled with the state
}

/// A user node without checkpoint support: yields each element plus one.
class PlusOne final : public dpipe::IterDataPipe<int> {
 public:
  explicit PlusOne(const dpipe::IterPipe<int>& source) : IterDataPipe("plus_one"), source_(source.ptr()) {}
  void for_each_input(const dpipe::InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] dpipe::DataPipePtr clone_self() const override { return std::make_shared<PlusOne>(*this); }

 protected:
  std::optional<int> next_impl() override {
    auto value = source_.next();
    if (!value) return std::nullopt;
    return *value + 1;
  }

 private:
  dpipe::Input<int> source_;
};

TEST_CASE("checkpoint: a node without state support falls back to replaying / with a warning", "[loader][checkpoint]") {
  const auto make = [] {
    return DataLoader2<int>(dpipe::make_iter<PlusOne>(iter::from(range(30)).shuffle(5)), InProcessReadingService());
  };
  auto reference = make();
  reference.seed(11);
  std::vector<int> first;
  for (int x : reference) first.push_back(x);
  dpipe::testing::LogCapture log;
  std::vector<std::byte> state;
  {
    auto loader = make();
    loader.seed(11);
    int taken = 0;
    for (int x : loader) {
      (void)x;
      if (++taken == 12) {
        state = loader.state_dict();
        break;
      }
    }
  }
  auto restored = make();
  restored.load_state_dict(state);
  std::vector<int> rest;
  for (int x : restored) rest.push_back(x);
  CHECK(rest == std::vector<int>(first.begin() + 12, first.end()));
  REQUIRE(log.messages().size() == 2);
  CHECK(log.messages()[0].starts_with("DataLoader2: plus_one#"));
  CHECK(log.messages()[0].ends_with("the checkpoint will replay the epoch to restore the position"));
  CHECK(log.messages()[1] ==
        "DataLoader2: the checkpoint holds no state for some node (it does not implement save_state); replaying 12 "
        "elements of epoch 1 to restore the position");
}

TEST_CASE("checkpoint: another pipeline / truncated / corrupted or late blobs are refused", "[loader][checkpoint]") {
  DataLoader2<int> source(iter::from(range(10)).shuffle());
  auto it = source.begin();
  ++it;
  const auto blob = source.state_dict();
  DataLoader2<int> other(iter::from(range(10)).batch(2).unbatch());
  CHECK_THROWS_WITH(
      other.load_state_dict(blob),
      Catch::Matches("the DataLoader2 checkpoint was saved from a different pipeline \\(graph fingerprint "
                     "[0-9a-f]{16}, this pipeline's is [0-9a-f]{16}\\); restore it into a loader built by "
                     "the same code"));
  DataLoader2<int> target(iter::from(range(10)).shuffle());
  CHECK_THROWS_MATCHES(target.load_state_dict(std::span(blob).first(5)), dpipe::StateError,
                       Catch::Message("the DataLoader2 checkpoint is truncated: 5 bytes, fewer than its 20-byte envelope"));
  auto flipped = blob;
  flipped[blob.size() / 2] ^= std::byte{1};
  CHECK_THROWS_MATCHES(
      target.load_state_dict(flipped), dpipe::StateError,
      Catch::Message("the DataLoader2 checkpoint is corrupted: its checksum does not match its contents"));
  auto foreign = blob;
  foreign[0] = std::byte{'x'};
  CHECK_THROWS_MATCHES(target.load_state_dict(foreign), dpipe::StateError,
                       Catch::Message("the bytes are not a DataLoader2 checkpoint (bad magic)"));
  (void)target.begin();
  CHECK_THROWS_MATCHES(target.load_state_dict(blob), dpipe::UsageError,
                       Catch::Message("DataLoaderV2 iterator has already been created, `load_state_dict()` can\u2019t "
                                      "be called. Please create a new dataloader in order to use load state dict."));
}

TEST_CASE("checkpoint: thousands of random corruptions are refused without a crash", "[loader][checkpoint][fuzz]") {
  auto reads = std::make_shared<std::atomic<int>>(0);
  DataLoader2<Batch> source(make_pipeline(1, reads), InProcessReadingService(2));
  source.seed(5);
  auto it = source.begin();
  for (int i = 0; i < 7; ++i) ++it;
  const auto blob = source.state_dict();
  std::mt19937_64 random(1121);
  int corrupted = 0;
  int refused = 0;
  for (int round = 0; round < 2000; ++round) {
    auto bytes = blob;
    for (int edit = 0; edit < 1 + static_cast<int>(random() % 3); ++edit) {
      if (random() % 4 == 0) {
        bytes.resize(random() % bytes.size());
      } else {
        bytes[random() % bytes.size()] = static_cast<std::byte>(random());
      }
      if (bytes.empty()) break;
    }
    if (bytes == blob) continue;
    ++corrupted;
    DataLoader2<Batch> target(make_pipeline(1, reads), InProcessReadingService(2));
    try {
      target.load_state_dict(bytes);
    } catch (const dpipe::StateError&) {
      ++refused;
    }
  }
  CHECK(corrupted > 1900);
  CHECK(refused == corrupted);
}

}  // namespace
