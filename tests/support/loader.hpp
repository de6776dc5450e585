#pragma once
// Helpers for loader tests: reading an epoch, a loader with worker processes, a user node without
// checkpoint support, and the replay-fallback check both reading services must pass.

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/log_capture.hpp"

namespace dpipe::testing {

/// The reference's error for an iterator of an epoch a newer iterator has replaced (§1.5).
inline const std::string kStaleLoader =
    "This iterator has been invalidated because another iterator has been created from the same DataLoader2.\nThis "
    "may be caused multiple references to the same DataLoader2. For feedback regarding this single iterator per "
    "DataLoader2 constraint, feel free to comment on this issue: https://github.com/pytorch/data/issues/45.";

/// Every element of the loader's next epoch, passed through `project` (which lets a test compare
/// the values behind move-only elements).
template <class T, class Project = std::identity>
auto epoch(DataLoader2<T>& loader, const Project& project = {}) {
  std::vector<std::remove_cvref_t<std::invoke_result_t<const Project&, T&>>> out;
  for (auto& element : loader) out.push_back(project(element));
  return out;
}

/// Reads until the loader throws Exception (stored in `caught`); returns what came before. Fails
/// if the epoch ends instead.
template <class Exception, class E>
std::vector<E> read_until(DataLoader2<E>& loader, Exception& caught) {
  std::vector<E> got;
  try {
    for (auto& element : loader) got.push_back(element);
    FAIL("the epoch ended without an exception");
  } catch (const Exception& error) {
    caught = error;
  }
  return got;
}

/// A MultiProcessingReadingService with `n` workers and default options.
inline MultiProcessingReadingService workers(std::size_t n) {
  return MultiProcessingReadingService({.num_workers = n});
}

/// A user node without checkpoint support: yields each element plus one.
class PlusOne final : public IterDataPipe<int> {
 public:
  explicit PlusOne(const IterPipe<int>& source) : IterDataPipe("plus_one"), source_(source.ptr()) {}
  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<PlusOne>(*this); }

 protected:
  std::optional<int> next_impl() override {
    auto value = source_.next();
    if (!value) return std::nullopt;
    return *value + 1;
  }

 private:
  Input<int> source_;
};

/// A loader from `make()` (seeded 11) whose graph holds a PlusOne, saved after 12 elements and
/// restored into a new loader, yields the rest of the epoch by replaying it, with two warnings;
/// the loader that saved goes on undisturbed to the end of its epoch.
template <class Make>
void check_replay_fallback(const Make& make) {
  auto reference = make();
  reference.seed(11);
  const auto first = epoch(reference);
  LogCapture log;
  std::vector<std::byte> state;
  {
    auto loader = make();
    loader.seed(11);
    std::vector<int> seen;
    for (int x : loader) {
      seen.push_back(x);
      if (seen.size() == 12) state = loader.state_dict();
    }
    CHECK(seen == first);
  }
  auto restored = make();
  restored.load_state_dict(state);
  CHECK(epoch(restored) == std::vector<int>(first.begin() + 12, first.end()));
  const auto messages = log.messages();
  REQUIRE(messages.size() == 2);
  CHECK(messages[0].starts_with("DataLoader2: plus_one#"));
  CHECK(messages[0].ends_with("the checkpoint will replay the epoch to restore the position"));
  CHECK(messages[1] ==
        "DataLoader2: the checkpoint holds no state for some node (it does not implement save_state); replaying 12 "
        "elements of epoch 1 to restore the position");
}

/// A pipeline of 40 shuffled, sharded elements whose map throws std::runtime_error("bad N") on the
/// value `bad` (none when it is negative).
inline IterPipe<int> failing_at(int bad) {
  return iter::from(range(40)).shuffle(8).sharding_filter().map([bad](int x) {
    if (x == bad) throw std::runtime_error("bad " + std::to_string(x));
    return x;
  });
}

/// A loader (`make(pipe)`, seeded 5) whose map throws on the 13th element hands out 12; its
/// state_dict() after the failure restores that position (by replaying the epoch) into a loader whose
/// pipeline does not throw, which yields the rest of the uninterrupted epoch from the 13th on.
template <class Make>
void check_checkpoint_after_failure(const Make& make) {
  auto reference = make(failing_at(-1));
  reference.seed(5);
  const auto first = epoch(reference);
  LogCapture log;
  std::vector<int> seen;
  auto failing = make(failing_at(first[12]));
  failing.seed(5);
  try {
    for (int x : failing) seen.push_back(x);
    FAIL("the failing loader ended its epoch");
  } catch (const std::exception& error) {
    CHECK(std::string(error.what()).find("bad " + std::to_string(first[12])) != std::string::npos);
  }
  CHECK(seen == std::vector<int>(first.begin(), first.begin() + 12));
  const auto state = failing.state_dict();
  auto restored = make(failing_at(-1));
  restored.load_state_dict(state);
  CHECK(restored.epoch() == 1);
  CHECK(restored.elements_in_epoch() == 12);
  CHECK(epoch(restored) == std::vector<int>(first.begin() + 12, first.end()));
  const auto messages = log.messages();
  REQUIRE(messages.size() >= 2);
  CHECK(messages[messages.size() - 2] ==
        "DataLoader2: the epoch failed after 12 elements; the checkpoint will replay the epoch to that position");
  CHECK(messages.back() ==
        "DataLoader2: the checkpoint was saved after the epoch failed; replaying 12 elements of epoch 1 to restore "
        "the position");
}

/// The restore sweep (SPEC §9): for every position k of an epoch of `make()` (seeded 7), a loader
/// restored from the state saved after k elements yields exactly the rest of the epoch, then the
/// next epoch of the uninterrupted run; the loader that saved goes on undisturbed. Returns the
/// uninterrupted first epoch. Elements are compared through `project`.
template <class Make, class Project = std::identity>
auto check_restore_sweep(const Make& make, const Project& project = {}) {
  auto reference = make();
  reference.seed(7);
  const auto first = epoch(reference, project);
  const auto second = epoch(reference, project);
  using Element = typename decltype(first)::value_type;
  const auto rest_after = [&](std::size_t k) {
    return std::vector<Element>(first.begin() + static_cast<std::ptrdiff_t>(k), first.end());
  };
  for (std::size_t k = 0; k <= first.size(); ++k) {
    INFO("saved after " << k << " elements");
    std::vector<std::byte> state;
    {
      auto loader = make();
      loader.seed(7);
      std::size_t taken = 0;
      auto it = loader.begin();
      for (; taken < k && it != loader.end(); ++it) ++taken;
      if (k == first.size()) CHECK(it == loader.end());  // the epoch is over
      state = loader.state_dict();
      if (k % 7 == 3) {
        std::vector<Element> rest;
        for (; it != loader.end(); ++it) rest.push_back(project(*it));
        CHECK(rest == rest_after(k));
      }
    }  // the loader that saved is gone
    auto restored = make();
    restored.load_state_dict(state);
    const auto rest = epoch(restored, project);
    if (k == first.size()) {
      CHECK(rest == second);  // saved after the epoch ended: the next iteration is the next epoch
    } else {
      CHECK(rest == rest_after(k));
      CHECK(epoch(restored, project) == second);
    }
  }
  return first;
}

}  // namespace dpipe::testing
