#pragma once
/// \file
/// IterationLocal<V>: a node member that belongs to one iteration (buffered elements, staging
/// vectors), which a clone does not take over.

#include <type_traits>
#include <utility>

namespace dpipe::detail {

/// Holds a value of one iteration of a node. Copying the holder, as DataPipe::clone_self() does,
/// gives a default-constructed value: a clone starts a fresh iteration, so it never needs the
/// elements of the original's. This is what lets a node that buffers elements be cloned when the
/// elements are move-only. Moves move the value. Thread-safety: that of V.
template <class V>
class IterationLocal {
  static_assert(std::is_default_constructible_v<V>, "IterationLocal<V> needs a default-constructible V");

 public:
  IterationLocal() = default;
  IterationLocal(const IterationLocal& /*other*/) noexcept(std::is_nothrow_default_constructible_v<V>) {}
  IterationLocal(IterationLocal&&) noexcept(std::is_nothrow_move_constructible_v<V>) = default;
  IterationLocal& operator=(const IterationLocal& other) {
    if (this != &other) value_ = V();
    return *this;
  }
  IterationLocal& operator=(IterationLocal&&) noexcept(std::is_nothrow_move_assignable_v<V>) = default;
  ~IterationLocal() = default;

  /// Replaces the value.
  IterationLocal& operator=(V value) {
    value_ = std::move(value);
    return *this;
  }

  V& operator*() noexcept { return value_; }
  const V& operator*() const noexcept { return value_; }
  V* operator->() noexcept { return &value_; }
  const V* operator->() const noexcept { return &value_; }

 private:
  V value_;
};

}  // namespace dpipe::detail
