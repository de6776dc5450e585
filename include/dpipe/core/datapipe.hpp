#pragma once
/// \file
/// DataPipe: the type-erased base of every node. The graph functions (dpipe::graph) see nodes only
/// through this interface: a stable id, a short name, the input edges, replicability, a copy of
/// the node's configuration for deep clones, and checkpoint state.

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <dpipe/core/element_codec.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe {

class DataPipe;
/// Shared ownership of a node; graphs are DAGs of these.
using DataPipePtr = std::shared_ptr<DataPipe>;

/// Where a node's checkpoint state is written to and read from.
using StateWriter = ByteWriter;
using StateReader = ByteReader;

/// What kind of element source a node is.
enum class PipeKind {
  kIter,          ///< an IterDataPipe<T>: a stream of T
  kMap,           ///< a MapDataPipe<K, V>: random access by key
  kSharedBuffer,  ///< the hidden container behind fork/demux/unzip children
};

/// One input edge of a node, seen without its static type. Graph functions use it to list,
/// replace and clone inputs. Thread-safety: none; edit graphs only while nothing iterates them.
class InputSlot {
 public:
  virtual ~InputSlot() = default;

  /// The node this edge reads from.
  [[nodiscard]] virtual DataPipePtr target() const = 0;
  /// Points the edge at `replacement` if it produces what the edge reads; returns false (and
  /// changes nothing) otherwise.
  [[nodiscard]] virtual bool try_assign(const DataPipePtr& replacement) = 0;
  /// Describes what the edge reads, e.g. "an iter pipe of int".
  [[nodiscard]] virtual std::string expected_type() const = 0;
  /// Starts a new iteration of the target on behalf of the node owning this edge.
  virtual void reset() = 0;
  /// Re-synchronises the edge with the target's current iteration (after a state restore).
  virtual void rebind() noexcept = 0;

 protected:
  InputSlot() = default;
  InputSlot(const InputSlot&) = default;
  InputSlot& operator=(const InputSlot&) = default;
};

/// Called once per input edge by DataPipe::for_each_input.
using InputVisitor = std::function<void(InputSlot&)>;

/// The type-erased base of every node. Nodes are always owned by std::shared_ptr.
/// Thread-safety: a node is used by one thread at a time (the thread iterating the graph), except
/// where a node documents otherwise (prefetch, threadpool_map own internal threads).
class DataPipe : public std::enable_shared_from_this<DataPipe> {
 public:
  virtual ~DataPipe() = default;
  DataPipe& operator=(const DataPipe&) = delete;

  /// A process-wide unique id, assigned at construction (a clone gets a new one).
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  /// The node's short functional name: "map", "shuffle", "sharding_filter", ...
  [[nodiscard]] std::string_view name() const noexcept { return name_; }
  /// "name#id": how messages and pictures refer to this node.
  [[nodiscard]] std::string label() const;

  [[nodiscard]] virtual PipeKind kind() const noexcept = 0;
  /// The element type, e.g. "int" for an iter pipe, "std::size_t -> int" for a map pipe.
  [[nodiscard]] virtual std::string element_type() const = 0;

  /// Calls `visit` on each input edge, in declaration order. Every node implements this.
  virtual void for_each_input(const InputVisitor& visit) = 0;
  /// The direct inputs, one entry per edge (a node read through two edges appears twice).
  [[nodiscard]] std::vector<DataPipePtr> inputs();
  /// Points every edge that reads from `old` at `replacement`; returns how many edges changed.
  /// Throws InvalidArgument, naming both element types, when `replacement` does not produce what
  /// an edge reads; nothing changes then.
  std::size_t replace_input(const DataPipe& old, const DataPipePtr& replacement);

  /// A free-form label users attach to find nodes later (a reading service may act on tagged
  /// nodes). Copied by clone; not part of the graph's fingerprint.
  [[nodiscard]] const std::string& tag() const noexcept { return tag_; }
  void set_tag(std::string tag) { tag_ = std::move(tag); }

  /// Whether MultiProcessingReadingService may run a copy of this node in each worker. A node that
  /// is not replicable, and everything downstream of it, stays in the main process.
  [[nodiscard]] virtual bool is_replicable() const noexcept { return replicable_; }
  /// Marks this node (non-)replicable.
  void set_replicable(bool replicable) noexcept { replicable_ = replicable; }

  /// A new node with this node's configuration and the same input edges, and a fresh id.
  /// graph::clone() uses it and then points the copy's edges at cloned inputs.
  [[nodiscard]] virtual DataPipePtr clone_self() const = 0;

  /// A node with this node's kind and element type that stands in for it (torchdata's
  /// _DummyIterDataPipe): MultiProcessingReadingService replaces the dispatched branch with one,
  /// then with a queue client. Iterating a placeholder throws UsageError.
  [[nodiscard]] virtual DataPipePtr make_placeholder() const;
  /// `prefetch(buffer_size)` on this node (an iter pipe), for reading services that only see the
  /// type-erased graph.
  [[nodiscard]] virtual DataPipePtr make_prefetch(std::size_t buffer_size);
  /// An encoder reading this node (an iter pipe) for another process, or nullptr when its element
  /// type has no dpipe::Serializer. See <dpipe/core/element_codec.hpp>.
  [[nodiscard]] virtual std::unique_ptr<ElementEncoder> make_encoder();
  /// A node named `name` yielding this node's element type decoded from `source`, or nullptr when
  /// the element type has no dpipe::Serializer.
  [[nodiscard]] virtual DataPipePtr make_decoder(std::shared_ptr<RecordSource> source, std::string name) const;

  /// Writes the node's own iteration state (not its inputs': each node saves itself). Returns
  /// false when the node does not support checkpoints (the default, for user nodes that do not
  /// override it).
  [[nodiscard]] virtual bool save_state(StateWriter& writer) const;
  /// Restores what save_state wrote, on a node built with the same configuration.
  virtual void load_state(StateReader& reader);

  /// Stops background work (threads) so that the graph's state can be read; the buffered elements
  /// stay. Called root first. The default does nothing.
  virtual void pause() {}
  /// Restarts what pause() stopped. Called sources first. The default does nothing.
  virtual void resume() {}

 protected:
  explicit DataPipe(std::string name);
  /// Copies the configuration with a fresh id.
  DataPipe(const DataPipe& other);

 private:
  std::uint64_t id_;
  std::string name_;
  std::string tag_;
  bool replicable_ = true;
};

/// Sharding groups (torchdata's SHARDING_PRIORITIES). DEFAULT cannot be mixed with the others;
/// DISTRIBUTED and MULTIPROCESSING combine into instance `worker + num_workers * rank`.
enum class ShardingPriority : int { kDefault = 1, kDistributed = 2, kMultiprocessing = 3 };

/// A node whose randomness the loader seeds each epoch (torchdata's `set_seed`).
class RandomDataPipe {
 public:
  virtual ~RandomDataPipe() = default;
  /// Seeds the next iteration only; the iteration after it draws a fresh seed unless set again.
  virtual void set_seed(std::uint64_t seed) = 0;
};

/// A random node that can become a pass-through (torchdata's `set_shuffle`).
class ShufflingDataPipe : public RandomDataPipe {
 public:
  virtual void set_shuffle(bool enabled) = 0;
};

/// A map node that can be turned into a threadpool_map with the same function and input.
class ParallelizableMap {
 public:
  virtual ~ParallelizableMap() = default;
  /// A threadpool_map node reading this node's input with this node's function.
  [[nodiscard]] virtual DataPipePtr to_threadpool_map(std::size_t threads, std::size_t max_in_flight) const = 0;
};

/// A node that keeps only its share of the stream (torchdata's `apply_sharding`).
class ShardingDataPipe {
 public:
  virtual ~ShardingDataPipe() = default;
  virtual void apply_sharding(std::size_t num_instances, std::size_t instance_id, ShardingPriority group) = 0;
};

namespace detail {
/// Marks placeholder nodes (see DataPipe::make_placeholder).
class PlaceholderTag {
 public:
  virtual ~PlaceholderTag() = default;
};

/// Marks sharding_round_robin_dispatch nodes, whatever their element type.
class RoundRobinDispatchTag {
 public:
  virtual ~RoundRobinDispatchTag() = default;
};

/// Throws the UsageError torchdata raises for an iterator made stale by a newer one.
[[noreturn]] void throw_stale_iterator(const DataPipe& node);
}  // namespace detail

}  // namespace dpipe
