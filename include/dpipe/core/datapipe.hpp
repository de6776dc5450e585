#pragma once
/// \file
/// DataPipe: the type-erased base of every node. The graph functions (dpipe::graph) see nodes only
/// through this interface: a stable id, a short name, the input edges, replicability, a copy of
/// the node's configuration for deep clones, background work, and checkpoint state. Operations
/// that need a node's static type go through <dpipe/core/typed_op.hpp>; what a node can do beyond
/// this interface, through the capability interfaces of <dpipe/core/capabilities.hpp>.

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <typeindex>
#include <utility>
#include <vector>

namespace dpipe {

/// A node's settings as names and values, in the node's order (DataPipe::settings()).
using NodeSettings = std::vector<std::pair<std::string, std::string>>;

class DataPipe;
class StateWriter;
class StateReader;
/// Shared ownership of a node; graphs are DAGs of these.
using DataPipePtr = std::shared_ptr<DataPipe>;

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
  /// "name#id": how messages and pictures refer to this node (made once, at construction, so a
  /// node may name itself on every element for free). A copy (graph::clone, the copy a
  /// DataLoader2 runs, a worker's copy) keeps the label of the node it copies, so that messages
  /// from a loader name the nodes of the pipeline its user built: label() == name#id() holds for
  /// the nodes a user builds, not for their copies.
  [[nodiscard]] const std::string& label() const noexcept { return label_; }

  [[nodiscard]] virtual PipeKind kind() const noexcept = 0;
  /// The element type, e.g. "int" for an iter pipe, "std::size_t -> int" for a map pipe.
  [[nodiscard]] virtual std::string element_type() const = 0;
  /// The element type as a key for typed operations: T for an iter pipe of T, MapDataPipe<K, V>
  /// for a map pipe (so that no operation registered for iter pipes of std::pair<K, V> ever
  /// applies to a map node), void for nodes that yield nothing themselves.
  [[nodiscard]] virtual std::type_index element_type_index() const noexcept { return typeid(void); }

  /// Calls `visit` on each input edge, in declaration order. Every node implements this.
  virtual void for_each_input(const InputVisitor& visit) = 0;
  /// The direct inputs, one entry per edge (a node read through two edges appears twice).
  [[nodiscard]] std::vector<DataPipePtr> inputs();
  /// Points every edge that reads from `old` at `replacement`; returns how many edges changed.
  /// Throws InvalidArgument, naming both element types, when `replacement` does not produce what
  /// an edge reads; nothing changes then.
  std::size_t replace_input(const DataPipe& old, const DataPipePtr& replacement);

  /// A free-form label users attach to find nodes later (a reading service may act on tagged
  /// nodes). Copied by clone; not part of a checkpoint.
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

  /// Whether the node keeps no iteration state of its own (map, batch, ...): its checkpoint holds
  /// nothing for it, and a checkpoint restores into a graph that gained or lost such a node. The
  /// default is false.
  [[nodiscard]] virtual bool stateless() const noexcept { return false; }
  /// Writes the node's own iteration state as named fields (not its inputs': each node saves
  /// itself). Returns false when the node does not support checkpoints: the default, for user
  /// nodes that override neither this nor stateless(); a stateless node writes nothing.
  [[nodiscard]] virtual bool save_state(StateWriter& writer) const;
  /// Restores what save_state wrote, on a node built with the same configuration. The reader
  /// refuses missing and corrupt fields with StateError.
  virtual void load_state(const StateReader& reader);

  /// The node's settings a checkpoint of the pipeline depends on, as names and values
  /// ({"batch_size", "32"}, a source's {"length", "100000"}): a checkpoint records them, and
  /// DataLoader2::load_state_dict() refuses one saved with other values, naming the node. Settings
  /// that do not change which elements come in which order (a prefetch's buffer) are left out.
  /// Empty by default. Called at checkpoints only.
  [[nodiscard]] virtual NodeSettings settings() const { return {}; }

  /// Stops the node's background work (its threads) so that its state can be read or the process
  /// forked; the elements it buffered stay. graph::BackgroundStop calls it root first. The default
  /// does nothing.
  virtual void stop_background() {}
  /// Restarts what stop_background() stopped. Called sources first. The default does nothing.
  virtual void start_background() {}

 protected:
  /// A node called `name` ("map", "running_sum"): non-empty, without ':' or '/', which separate
  /// the keys of a checkpoint (InvalidArgument otherwise).
  explicit DataPipe(std::string name);
  /// Copies the configuration and the label, with a fresh id.
  DataPipe(const DataPipe& other);

 private:
  std::uint64_t id_;
  std::string name_;
  std::string label_;
  std::string tag_;
  bool replicable_ = true;
};

namespace detail {
/// Marks placeholder nodes (see ops::Placeholder). A placeholder may be given the length of what
/// it stands in for, so that a graph holding one still knows its length.
class PlaceholderTag {
 public:
  virtual ~PlaceholderTag() = default;
  void set_stand_in_length(std::optional<std::size_t> length) noexcept { stand_in_length_ = length; }

 protected:
  std::optional<std::size_t> stand_in_length_;
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
