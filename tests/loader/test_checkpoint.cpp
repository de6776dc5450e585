// Exact checkpoints in process (SPEC §9): for every position k, a loader restored from the state
// saved after k elements yields the rest of the uninterrupted epoch, then the same next epoch;
// restoring does not replay; bad blobs are refused with StateError.

#include <atomic>
#include <filesystem>
#include <iterator>
#include <memory>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/corruption.hpp"
#include "support/loader.hpp"
#include "support/loader_fuzz.hpp"
#include "support/log_capture.hpp"

namespace {

namespace iter = dpipe::iter;
using dpipe::DataLoader2;
using dpipe::InProcessReadingService;
using dpipe::testing::epoch;
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
          .map([](auto pair) { return dpipe::testing::mix(std::get<0>(pair), 1000, std::get<1>(pair)); })
          .prefetch(5)
          .batch(3);
    }
    default:
      return source.threadpool_map([](int x) { return x * x; }, 2, 6).shuffle(10).sharding_filter().batch(5);
  }
}

TEST_CASE("checkpoint: restored at every position it continues exactly / the next epoch too", "[loader][checkpoint]") {
  for (const bool with_service : {true, false}) {
    for (int which = 0; which < 3; ++which) {
      INFO("pipeline " << which << (with_service ? " with InProcessReadingService(3)" : " without a service"));
      const auto first = dpipe::testing::check_restore_sweep([&] {
        auto reads = std::make_shared<std::atomic<int>>(0);
        auto pipe = make_pipeline(which, reads);
        return with_service ? DataLoader2<Batch>(pipe, InProcessReadingService(3)) : DataLoader2<Batch>(pipe);
      });
      CHECK(first.size() > 10);
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
  CHECK(epoch(restored).size() == 45 - 40);
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

TEST_CASE("checkpoint: a node without state support falls back to replaying / with a warning", "[loader][checkpoint]") {
  dpipe::testing::check_replay_fallback([] {
    return DataLoader2<int>(dpipe::make_iter<dpipe::testing::PlusOne>(iter::from(range(30)).shuffle(5)),
                            InProcessReadingService());
  });
}

TEST_CASE("checkpoint: epoch() and elements_in_epoch() are the restored ones before the first begin()",
          "[loader][checkpoint]") {
  const auto make = [] { return DataLoader2<int>(iter::from(range(10)).shuffle(4)); };
  auto loader = make();
  loader.seed(3);
  (void)dpipe::testing::epoch(loader);  // epoch 1
  auto it = loader.begin();             // epoch 2
  for (int i = 0; i < 5; ++i) ++it;
  const auto mid_epoch = loader.state_dict();
  for (; it != loader.end(); ++it) {
  }
  const auto ended = loader.state_dict();

  auto resumed = make();
  resumed.load_state_dict(mid_epoch);
  CHECK(resumed.epoch() == 2);  // a trainer that seeds per epoch from epoch() sees the saved epoch
  CHECK(resumed.elements_in_epoch() == 5);
  CHECK(dpipe::testing::epoch(resumed).size() == 5);  // the rest of epoch 2
  CHECK(resumed.epoch() == 2);
  CHECK(resumed.elements_in_epoch() == 10);

  auto after_end = make();
  after_end.load_state_dict(ended);
  CHECK(after_end.epoch() == 2);
  CHECK(after_end.elements_in_epoch() == 10);
  CHECK(dpipe::testing::epoch(after_end).size() == 10);  // the next iteration is epoch 3
  CHECK(after_end.epoch() == 3);
}

TEST_CASE("checkpoint files: saved atomically / loaded back / clear errors", "[loader][checkpoint]") {
  const auto directory = std::filesystem::temp_directory_path() / ("dpipe-checkpoint-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  const auto path = directory / "loader.bin";
  DataLoader2<int> loader(iter::from(range(10)).shuffle(4));
  auto it = loader.begin();
  ++it;
  const auto blob = loader.state_dict();
  dpipe::save_checkpoint_file(path, blob);
  CHECK(dpipe::load_checkpoint_file(path) == blob);
  const std::vector<std::byte> smaller(blob.begin(), blob.begin() + 10);
  dpipe::save_checkpoint_file(path, smaller);  // replaces the file whole
  CHECK(dpipe::load_checkpoint_file(path) == smaller);
  CHECK(std::distance(std::filesystem::directory_iterator(directory), std::filesystem::directory_iterator()) == 1);

  // A save that fails (here: the rename, over a directory) leaves the previous file and no temporary one.
  const auto occupied = directory / "occupied";
  std::filesystem::create_directory(occupied);
  std::filesystem::create_directory(occupied / "inside");
  CHECK_THROWS_WITH(dpipe::save_checkpoint_file(occupied, blob),
                    Catch::StartsWith("checkpoint file " + occupied.string() + ".tmp-") &&
                        Catch::Contains(": cannot rename it over the checkpoint: "));
  CHECK(std::distance(std::filesystem::directory_iterator(directory), std::filesystem::directory_iterator()) == 2);

  CHECK_THROWS_MATCHES(dpipe::load_checkpoint_file(directory / "missing.bin"), dpipe::StateError,
                       Catch::Message("checkpoint file " + (directory / "missing.bin").string() +
                                      ": cannot open it: No such file or directory"));
  CHECK_THROWS_MATCHES(dpipe::load_checkpoint_file(occupied), dpipe::StateError,
                       Catch::Message("checkpoint file " + occupied.string() + ": not a regular file"));
  CHECK_THROWS_AS(dpipe::save_checkpoint_file(directory / "no" / "such" / "dir.bin", blob), dpipe::StateError);
  CHECK_THROWS_WITH(
      dpipe::save_checkpoint_file(directory / "no" / "such" / "dir.bin", blob),
      Catch::StartsWith("checkpoint file " + (directory / "no" / "such" / "dir.bin").string() + ".tmp-") &&
          Catch::EndsWith(": cannot create it: No such file or directory"));
  std::filesystem::remove_all(directory);
}

TEST_CASE("checkpoint: a job's checkpoint file without a distributed service is a job of one rank",
          "[loader][checkpoint]") {
  const dpipe::testing::LogCapture quiet;
  const auto directory =
      std::filesystem::temp_directory_path() / ("dpipe-job-checkpoint-" + std::to_string(::getpid()));
  std::filesystem::create_directories(directory);
  const auto path = directory / "job.bin";
  const auto pipeline = [] { return iter::from(range(100)).shuffle(8).sharding_filter().batch(4); };
  for (const bool with_workers : {false, true}) {
    INFO((with_workers ? "2 worker processes" : "in process"));
    const auto make_loader = [&] {
      return with_workers ? DataLoader2<Batch>(pipeline(), dpipe::testing::workers(2)) : DataLoader2<Batch>(pipeline());
    };
    auto whole = make_loader();
    whole.seed(5);
    const auto first = epoch(whole);
    const auto second = epoch(whole);
    std::vector<Batch> seen;
    {
      auto loader = make_loader();
      loader.seed(5);
      for (auto& batch : loader) {
        seen.push_back(batch);
        if (seen.size() == 7) {
          loader.save_job_checkpoint(path);
          break;
        }
      }
    }
    auto resumed = make_loader();
    resumed.load_job_checkpoint(path);
    CHECK(resumed.elements_in_epoch() == 7);
    for (auto& batch : resumed) seen.push_back(batch);
    CHECK(seen == first);
    CHECK(epoch(resumed) == second);
  }

  // A job's file is not one loader's checkpoint, nor the other way round; both say which verb to use.
  DataLoader2<Batch> job_file_loader(pipeline());
  CHECK_THROWS_MATCHES(job_file_loader.load_state_dict(dpipe::load_checkpoint_file(path)), dpipe::StateError,
                       Catch::Message("the checkpoint holds the states of every rank of a job "
                                      "(DataLoader2::save_job_checkpoint): restore it with load_job_checkpoint() on "
                                      "every rank"));
  const auto single = directory / "loader.bin";
  dpipe::save_checkpoint_file(single, job_file_loader.state_dict());
  CHECK_THROWS_MATCHES(job_file_loader.load_job_checkpoint(single), dpipe::StateError,
                       Catch::Message("checkpoint file " + single.string() +
                                      ": it holds the state of one loader, not a job's: restore it with "
                                      "load_state_dict(load_checkpoint_file(path))"));
  CHECK_THROWS_MATCHES(job_file_loader.load_job_checkpoint(directory / "missing.bin"), dpipe::StateError,
                       Catch::Message("checkpoint file " + (directory / "missing.bin").string() +
                                      ": cannot open it: No such file or directory"));
  auto truncated = dpipe::load_checkpoint_file(path);
  truncated.resize(truncated.size() / 2);
  dpipe::save_checkpoint_file(path, truncated);
  CHECK_THROWS_WITH(job_file_loader.load_job_checkpoint(path),
                    Catch::StartsWith("checkpoint file " + path.string() + ": "));
  CHECK(epoch(job_file_loader).size() == 25);  // the refusals left the loader as it was
  std::filesystem::remove_all(directory);
}

TEST_CASE("checkpoint: a field that belongs to nothing in the loader is refused", "[loader][checkpoint]") {
  DataLoader2<int> source(iter::from(range(10)).shuffle());
  auto it = source.begin();
  ++it;
  const auto fields = dpipe::StateStore::from_blob(source.state_dict());
  for (const std::string key : {"loader:mystery", "elsewhere/node:position"}) {
    dpipe::StateStore extended;
    extended.merge(fields, "");
    extended.add(key, dpipe::FieldKind::kOther);
    DataLoader2<int> target(iter::from(range(10)).shuffle());
    CHECK_THROWS_MATCHES(target.load_state_dict(extended.to_blob()), dpipe::StateError,
                         Catch::Message("the checkpoint's field " + key + " belongs to nothing in a DataLoader2"));
  }
}

/// A checkpoint of `loader` after it handed out `taken` elements of its first epoch.
template <class T>
std::vector<std::byte> saved_after(DataLoader2<T>&& loader, int taken) {
  auto it = loader.begin();
  for (int i = 1; i < taken; ++i) ++it;
  (void)*it;
  return loader.state_dict();
}

TEST_CASE("checkpoint: a pipeline with other settings is refused by node path and both values",
          "[loader][checkpoint]") {
  const auto refusal = [](const std::string& changes, const std::string& advice = "") {
    return Catch::Message("the checkpoint was saved from a pipeline with other settings (" + changes +
                          "); restore it into a loader built with the same settings" + advice);
  };
  const std::string length_advice =
      ", or accept a source whose length changed on purpose with RestoreOptions::accept_changed_source_length";
  SECTION("a source of another length") {
    const auto blob = saved_after(DataLoader2<std::vector<int>>(iter::from(range(100)).batch(10)), 3);
    for (const int length : {50, 200}) {
      DataLoader2<std::vector<int>> target(iter::from(range(length)).batch(10));
      CHECK_THROWS_MATCHES(
          target.load_state_dict(blob), dpipe::StateError,
          refusal("batch/from: length 100 in the checkpoint, " + std::to_string(length) + " here", length_advice));
    }
    // Accepted on purpose: the saved position continues in the longer source.
    DataLoader2<std::vector<int>> grown(iter::from(range(200)).batch(10));
    grown.load_state_dict(blob, {.accept_changed_source_length = true});
    std::vector<std::vector<int>> expected;
    for (int first = 30; first < 200; first += 10) expected.push_back(range(first, first + 10));
    CHECK(epoch(grown) == expected);
  }
  SECTION("another batch_size and drop_last") {
    const auto blob = saved_after(DataLoader2<std::vector<int>>(iter::from(range(100)).batch(32)), 1);
    DataLoader2<std::vector<int>> target(iter::from(range(100)).batch(16, true));
    CHECK_THROWS_MATCHES(target.load_state_dict(blob), dpipe::StateError,
                         refusal("batch: batch_size 32 in the checkpoint, 16 here; batch: drop_last false in the "
                                 "checkpoint, true here"));
  }
  SECTION("another shuffle buffer") {
    const auto blob = saved_after(DataLoader2<int>(iter::from(range(100)).shuffle(50)), 1);
    DataLoader2<int> target(iter::from(range(100)).shuffle(10));
    CHECK_THROWS_MATCHES(target.load_state_dict(blob), dpipe::StateError,
                         refusal("shuffle: buffer_size 50 in the checkpoint, 10 here"));
  }
  SECTION("a stateless node with settings more or less") {
    const auto blob = saved_after(DataLoader2<std::vector<int>>(iter::from(range(100)).batch(4)), 1);
    DataLoader2<std::vector<int>> target(iter::from(range(100)).batch(2).batch(2).map([](auto batch) {
      std::vector<int> flat;
      for (const auto& inner : batch) flat.insert(flat.end(), inner.begin(), inner.end());
      return flat;
    }));
    CHECK_THROWS_MATCHES(
        target.load_state_dict(blob), dpipe::StateError,
        Catch::Message("the checkpoint was saved from a different pipeline (nodes by path; only in the checkpoint: "
                       "batch/from (int); only in this pipeline: batch/batch (std::vector<int>), batch/batch/from "
                       "(int); batch yields std::vector<int> in the checkpoint, std::vector<std::vector<int>> "
                       "here); restore it into a loader built by the same code"));
  }
}

TEST_CASE("checkpoint: a fingerprint of the user's own must match", "[loader][checkpoint]") {
  const auto pipe = [] { return iter::from(range(10)).map([](int x) { return x * 3; }); };
  DataLoader2<int> source(pipe());
  source.set_fingerprint("augment v1");
  const auto blob = saved_after(std::move(source), 4);
  for (const std::string other : {"augment v2", ""}) {
    DataLoader2<int> target(pipe());
    target.set_fingerprint(other);
    CHECK_THROWS_MATCHES(
        target.load_state_dict(blob), dpipe::StateError,
        Catch::Message("the checkpoint was saved by a loader with the fingerprint \"augment v1\", this "
                       "loader has \"" +
                       other + "\"; restore it into a loader built by the same code"));
  }
  DataLoader2<int> same(pipe());
  same.set_fingerprint("augment v1");
  same.load_state_dict(blob);
  CHECK(epoch(same) == std::vector<int>{12, 15, 18, 21, 24, 27});
}

TEST_CASE("checkpoint: another pipeline / truncated / corrupted or late blobs are refused", "[loader][checkpoint]") {
  DataLoader2<int> source(iter::from(range(10)).shuffle());
  auto it = source.begin();
  ++it;
  const auto blob = source.state_dict();
  DataLoader2<int> other(iter::from(range(10)).batch(2).unbatch());
  CHECK_THROWS_MATCHES(other.load_state_dict(blob), dpipe::StateError,
                       Catch::Message("the checkpoint was saved from a different pipeline (nodes by path; "
                                      "only in the checkpoint: shuffle (int), shuffle/from (int); only in this "
                                      "pipeline: unbatch (int), unbatch/batch (std::vector<int>), unbatch/batch/from "
                                      "(int)); restore it into a loader built by the same code"));
  DataLoader2<int> shorter(iter::from(range(10)));
  CHECK_THROWS_MATCHES(shorter.load_state_dict(blob), dpipe::StateError,
                       Catch::Message("the checkpoint was saved from a different pipeline (nodes by path; "
                                      "only in the checkpoint: shuffle (int), shuffle/from (int); only in this "
                                      "pipeline: from (int)); restore it into a loader built by the same code"));
  DataLoader2<int> longer(iter::from(range(10)).shuffle().header(5));
  CHECK_THROWS_MATCHES(longer.load_state_dict(blob), dpipe::StateError,
                       Catch::Message("the checkpoint was saved from a different pipeline (nodes by path; "
                                      "only in the checkpoint: shuffle (int), shuffle/from (int); only in this "
                                      "pipeline: header (int), header/shuffle (int), header/shuffle/from (int)); "
                                      "restore it into a loader built by the same code"));
  std::vector<long> longs(10);
  DataLoader2<long> retyped(iter::from(longs).shuffle());
  CHECK_THROWS_MATCHES(retyped.load_state_dict(blob), dpipe::StateError,
                       Catch::Message("the checkpoint was saved from a different pipeline (nodes by path; "
                                      "shuffle yields int in the checkpoint, long int here; shuffle/from yields int "
                                      "in the checkpoint, long int here); restore it into a loader built by the same "
                                      "code"));
  CHECK_THROWS_MATCHES(DataLoader2<int>(iter::from(range(10)).shuffle())
                           .load_state_dict(dpipe::testing::test_data("format1_loader.bin")),
                       dpipe::StateError, Catch::Message(dpipe::testing::kFormat1Refusal));
  DataLoader2<int> mapped(iter::from(range(10)).map([](int x) { return x; }).shuffle());
  mapped.load_state_dict(blob);  // a stateless node more is no other pipeline
  DataLoader2<int> target(iter::from(range(10)).shuffle());
  CHECK_THROWS_MATCHES(target.load_state_dict(std::span(blob).first(5)), dpipe::StateError,
                       Catch::Message("the bytes are not a dpipe checkpoint (5 bytes, too short)"));
  CHECK_THROWS_MATCHES(target.load_state_dict(std::span(blob).first(blob.size() - 3)), dpipe::StateError,
                       Catch::Message(fmt::format("the checkpoint is truncated: it has {} of its {} bytes",
                                                  blob.size() - 3, blob.size())));
  auto flipped = blob;
  flipped[blob.size() / 2] ^= std::byte{1};
  CHECK_THROWS_MATCHES(target.load_state_dict(flipped), dpipe::StateError,
                       Catch::Message("the checkpoint is corrupted: its checksum does not match its contents"));
  auto foreign = blob;
  foreign[0] = std::byte{'x'};
  CHECK_THROWS_MATCHES(target.load_state_dict(foreign), dpipe::StateError,
                       Catch::Message("the bytes are not a dpipe checkpoint (bad magic)"));
  (void)target.begin();
  CHECK_THROWS_MATCHES(target.load_state_dict(blob), dpipe::UsageError,
                       Catch::Message("DataLoaderV2 iterator has already been created, `load_state_dict()` can\u2019t "
                                      "be called. Please create a new dataloader in order to use load state dict."));
}

/// A loader's checkpoint after 7 batches of pipeline 1.
std::vector<std::byte> saved_mid_epoch() {
  auto reads = std::make_shared<std::atomic<int>>(0);
  DataLoader2<Batch> source(make_pipeline(1, reads), InProcessReadingService(2));
  source.seed(5);
  auto it = source.begin();
  for (int i = 0; i < 7; ++i) ++it;
  return source.state_dict();
}

TEST_CASE("checkpoint: thousands of random corruptions are refused without a crash", "[loader][checkpoint][fuzz]") {
  const auto blob = saved_mid_epoch();
  auto reads = std::make_shared<std::atomic<int>>(0);
  std::mt19937_64 random(1121);
  int corrupted = 0;
  int refused = 0;
  for (int round = 0; round < 2000; ++round) {
    const auto bytes = dpipe::testing::corrupt(blob, random);
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

TEST_CASE("checkpoint: corruptions behind valid checksums reach every decoder / and never crash",
          "[loader][checkpoint][fuzz]") {
  // The loader's blob nests the graph's: both checksums are recomputed, so the loader's fields and
  // every node's load_state see hostile bytes.
  auto reads = std::make_shared<std::atomic<int>>(0);
  const auto outcome = dpipe::testing::fuzz_resealed(saved_mid_epoch(), 2026, 2000, [&] {
    return DataLoader2<Batch>(make_pipeline(1, reads), InProcessReadingService(2));
  });
  CHECK(outcome.refused > 0);
  CHECK(outcome.restored > 0);
  CHECK(outcome.refused + outcome.restored == 2000);
}

TEST_CASE("checkpoint: saved after the pipeline threw it restores the position of the last element handed out",
          "[loader][checkpoint]") {
  dpipe::testing::check_checkpoint_after_failure(
      [](const dpipe::IterPipe<int>& pipe) { return DataLoader2<int>(pipe); });
  dpipe::testing::check_checkpoint_after_failure(
      [](const dpipe::IterPipe<int>& pipe) { return DataLoader2<int>(pipe, InProcessReadingService()); });
}

TEST_CASE("checkpoint: saved after a failure it restores into a pipeline that skips failures / not other settings",
          "[loader][checkpoint]") {
  const dpipe::testing::LogCapture quiet;
  const auto decode = [](int x) {
    if (x % 10 == 7) throw std::invalid_argument("corrupt");
    return x;
  };
  DataLoader2<int> strict(iter::from(range(30)).shuffle(4).map(decode));
  strict.seed(3);
  std::vector<int> seen;
  CHECK_THROWS_AS(
      [&] {
        for (int x : strict) seen.push_back(x);
      }(),
      std::invalid_argument);
  const auto state = strict.state_dict();

  DataLoader2<int> reference(iter::from(range(30)).shuffle(4).map(decode, dpipe::OnError::skip()));
  reference.seed(3);
  const auto all = epoch(reference);
  DataLoader2<int> tolerant(iter::from(range(30)).shuffle(4).map(decode, dpipe::OnError::skip()));
  tolerant.load_state_dict(state);
  auto joined = seen;
  for (int x : epoch(tolerant)) joined.push_back(x);
  CHECK(joined == all);
  CHECK(all.size() == 27);

  DataLoader2<int> other_buffer(iter::from(range(30)).shuffle(5).map(decode, dpipe::OnError::skip()));
  CHECK_THROWS_MATCHES(other_buffer.load_state_dict(state), dpipe::StateError,
                       Catch::Message("the checkpoint was saved from a pipeline with other settings (shuffle: "
                                      "buffer_size 4 in the checkpoint, 5 here); restore it into a loader built with "
                                      "the same settings"));
}

}  // namespace
