#pragma once
/// \file
/// `groupby(key_fn, options)` (torchdata's Grouper): gathers elements by key_fn(x) into groups.
/// A group of `group_size` is yielded as soon as it is full; when `buffer_size` elements are
/// buffered, the biggest group (the oldest on ties) leaves the buffer: it is yielded if it has at
/// least `guaranteed_group_size` elements, dropped if smaller and `drop_remaining`, and otherwise
/// the read fails with BufferOverflowError ("Failed to group items"). The buffer never holds more
/// than `buffer_size` elements. At the end the remaining groups are yielded in the order their
/// keys first appeared. `groupby_keyed` yields (key, group) pairs. The length is unknown.
/// Checkpoint state: the buffered groups.

#include <concepts>
#include <cstdint>
#include <list>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <dpipe/core/detail/buffered_elements.hpp>
#include <dpipe/core/detail/user_function.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe {

/// groupby's settings (torchdata's keyword arguments), set by chaining:
/// `GroupByOptions().group_size(3).buffer_size(100)`.
class GroupByOptions {
 public:
  /// The most elements buffered (default 10000).
  GroupByOptions& buffer_size(std::size_t size) {
    buffer_size_ = size;
    return *this;
  }
  /// Yield a group as soon as it has this many elements. Also the default guaranteed_group_size.
  GroupByOptions& group_size(std::size_t size) {
    group_size_ = size;
    return *this;
  }
  /// The smallest group the buffer may evict; requires group_size.
  GroupByOptions& guaranteed_group_size(std::size_t size) {
    guaranteed_group_size_ = size;
    return *this;
  }
  /// Drop evicted groups smaller than guaranteed_group_size instead of failing.
  GroupByOptions& drop_remaining(bool drop = true) {
    drop_remaining_ = drop;
    return *this;
  }

  [[nodiscard]] std::size_t buffer_size() const noexcept { return buffer_size_; }
  [[nodiscard]] std::optional<std::size_t> group_size() const noexcept { return group_size_; }
  [[nodiscard]] std::optional<std::size_t> guaranteed_group_size() const noexcept { return guaranteed_group_size_; }
  [[nodiscard]] bool drop_remaining() const noexcept { return drop_remaining_; }

 private:
  std::size_t buffer_size_ = 10000;
  std::optional<std::size_t> group_size_;
  std::optional<std::size_t> guaranteed_group_size_;
  bool drop_remaining_ = false;
};

namespace iter {

template <class T, key_fn<T> F, bool KeepKey>
class Grouper final : public IterDataPipe<groupby_result_t<F, T, KeepKey>> {
  using K = key_fn_result_t<F, T>;
  using Out = groupby_result_t<F, T, KeepKey>;

 public:
  static constexpr std::string_view kName = "groupby";

  Grouper(const IterPipe<T>& source, F key_fn, const GroupByOptions& options)
      : IterDataPipe<Out>(std::string(kName)),
        source_(source.ptr()),
        key_fn_(std::move(key_fn)),
        buffer_size_(options.buffer_size()),
        group_size_(options.group_size()),
        drop_remaining_(options.drop_remaining()) {
    if (group_size_) {
      if (*group_size_ == 0 || *group_size_ > buffer_size_) {
        DPIPE_THROW(InvalidArgument, "group_size must be > 0 and <= buffer_size (got group_size {}, buffer_size {})",
                    *group_size_, buffer_size_);
      }
      guaranteed_ = group_size_;
    }
    if (options.guaranteed_group_size()) {
      const auto guaranteed = *options.guaranteed_group_size();
      if (!group_size_ || guaranteed == 0 || guaranteed > *group_size_) {
        DPIPE_THROW(InvalidArgument, "guaranteed_group_size must be > 0 and <= group_size and group_size must be set");
      }
      guaranteed_ = guaranteed;
    }
    if (buffer_size_ == 0) DPIPE_THROW(InvalidArgument, "buffer_size must be > 0");
  }

  /// Copies the configuration; the copy's buffer is empty.
  Grouper(const Grouper& other)
      : IterDataPipe<Out>(other),
        source_(other.source_),
        key_fn_(other.key_fn_),
        buffer_size_(other.buffer_size_),
        group_size_(other.group_size_),
        guaranteed_(other.guaranteed_),
        drop_remaining_(other.drop_remaining_) {}

  void for_each_input(const InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Grouper>(*this); }
  [[nodiscard]] NodeSettings settings() const override {
    const auto optional = [](const std::optional<std::size_t>& value) {
      return value ? std::to_string(*value) : std::string("none");
    };
    return {{"buffer_size", std::to_string(buffer_size_)},
            {"group_size", optional(group_size_)},
            {"guaranteed_group_size", optional(guaranteed_)},
            {"drop_remaining", drop_remaining_ ? "true" : "false"}};
  }

  [[nodiscard]] bool save_state(StateWriter& writer) const override {
    writer.write("draining", draining_);
    if constexpr (serializable<K> && serializable<T>) {
      ByteWriter out = writer.field("groups");
      out.write_size(groups_.size());
      for (const auto& group : groups_) {
        out.write(group.key);
        out.write(group.elements);
      }
      return true;
    } else {
      if (!groups_.empty()) {
        DPIPE_THROW(StateError,
                    "{} buffers groups of keys {} and elements {}; both need a dpipe::Serializer to checkpoint it",
                    this->label(), type_name<K>(), type_name<T>());
      }
      writer.field("groups").write_size(0);
      return true;
    }
  }

  void load_state(const StateReader& reader) override {
    clear();
    draining_ = reader.read<bool>("draining");
    reader.decode("groups", [&](ByteReader& in) {
      const auto count = in.read_count(1);
      if constexpr (serializable<K> && serializable<T>) {
        for (std::size_t i = 0; i < count; ++i) {
          K key = in.read<K>();
          auto elements = in.read<std::vector<T>>();
          if (elements.empty() || index_.contains(key))
            DPIPE_THROW(StateError, "{}: a saved group is empty or repeated", this->label());
          buffered_ += elements.size();
          index_.emplace(key, groups_.insert(groups_.end(), Group{std::move(key), std::move(elements)}));
        }
      } else if (count != 0) {
        DPIPE_THROW(StateError, "{}: the state holds groups of types without a dpipe::Serializer", this->label());
      }
    });
    if (buffered_ > buffer_size_)
      DPIPE_THROW(StateError, "{}: the saved groups exceed buffer_size {}", this->label(), buffer_size_);
  }

 protected:
  void reset_impl() override {
    clear();
    draining_ = false;
    source_.reset();
  }

  std::optional<Out> next_impl() override {
    while (!draining_) {
      auto element = source_.next();
      if (!element) {
        draining_ = true;
        break;
      }
      K key = detail::call_user_function(*this, key_fn_, std::as_const(*element));
      auto found = index_.find(key);
      if (found == index_.end()) found = index_.emplace(key, groups_.insert(groups_.end(), Group{key, {}})).first;
      found->second->elements.push_back(std::move(*element));
      ++buffered_;
      std::optional<Out> full;
      if (group_size_ && found->second->elements.size() == *group_size_) full = take(found->second);
      if (buffered_ == buffer_size_) {
        auto evicted = evict_biggest();
        if (!full) full = std::move(evicted);  // a full group and an eviction cannot both happen
      }
      if (full) return full;
    }
    if (groups_.empty()) return std::nullopt;
    return take(groups_.begin());
  }

 private:
  struct Group {
    K key;
    std::vector<T> elements;
  };
  using GroupIterator = typename std::list<Group>::iterator;

  Out take(GroupIterator group) {
    buffered_ -= group->elements.size();
    index_.erase(group->key);
    Group taken = std::move(*group);
    groups_.erase(group);
    if constexpr (KeepKey) {
      return Out(std::move(taken.key), std::move(taken.elements));
    } else {
      return std::move(taken.elements);
    }
  }

  /// Removes the biggest group (the oldest on ties); returns it unless it is dropped.
  std::optional<Out> evict_biggest() {
    auto biggest = groups_.begin();
    for (auto it = groups_.begin(); it != groups_.end(); ++it) {
      if (it->elements.size() > biggest->elements.size()) biggest = it;
    }
    const std::size_t size = biggest->elements.size();
    if (guaranteed_ && size < *guaranteed_ && !drop_remaining_) {
      DPIPE_THROW(BufferOverflowError,
                  "Failed to group items ({}: the buffer of {} elements is full and its biggest group has {} elements, "
                  "fewer than guaranteed_group_size {}; raise buffer_size or set drop_remaining)",
                  this->label(), buffer_size_, size, *guaranteed_);
    }
    if (guaranteed_ && size < *guaranteed_) {
      buffered_ -= size;
      index_.erase(biggest->key);
      groups_.erase(biggest);
      return std::nullopt;
    }
    return take(biggest);
  }

  void clear() {
    groups_.clear();
    index_.clear();
    buffered_ = 0;
  }

  Input<T> source_;
  F key_fn_;
  std::size_t buffer_size_;
  std::optional<std::size_t> group_size_;
  std::optional<std::size_t> guaranteed_;
  bool drop_remaining_;
  std::list<Group> groups_;  // in the order their keys first appeared
  std::unordered_map<K, GroupIterator> index_;
  std::size_t buffered_ = 0;
  bool draining_ = false;  // the source ended: yielding what is left
};

}  // namespace iter

template <class T>
template <key_fn<T> F, class Options>
IterPipe<std::vector<T>> IterPipe<T>::groupby(F key_fn, const Options& options) const {
  static_assert(std::same_as<Options, GroupByOptions>, "groupby's options are a dpipe::GroupByOptions");
  return make_iter<iter::Grouper<T, F, false>>(*this, std::move(key_fn), options);
}

template <class T>
template <key_fn<T> F, class Options>
IterPipe<std::pair<key_fn_result_t<F, T>, std::vector<T>>> IterPipe<T>::groupby_keyed(F key_fn,
                                                                                      const Options& options) const {
  static_assert(std::same_as<Options, GroupByOptions>, "groupby_keyed's options are a dpipe::GroupByOptions");
  return make_iter<iter::Grouper<T, F, true>>(*this, std::move(key_fn), options);
}

namespace iter {

/// `src | iter::groupby(key_fn, options)`.
template <class F>
[[nodiscard]] auto groupby(F key_fn, GroupByOptions options = GroupByOptions()) {
  return PipeAdaptor{[=](const auto& source) { return source.groupby(key_fn, options); }};
}

}  // namespace iter
}  // namespace dpipe
