// DataPipe: ids, labels, input listing, checked input replacement, and the stale-iterator error.

#include <atomic>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/error.hpp>

namespace dpipe {
namespace {

std::uint64_t next_node_id() {
  static std::atomic<std::uint64_t> counter{0};
  return counter.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::string_view kind_name(PipeKind kind) {
  switch (kind) {
    case PipeKind::kIter:
      return "an iter pipe";
    case PipeKind::kMap:
      return "a map pipe";
    case PipeKind::kSharedBuffer:
      return "a shared buffer";
  }
  return "a node";
}

}  // namespace

DataPipe::DataPipe(std::string name)
    : id_(next_node_id()), name_(std::move(name)), label_(fmt::format("{}#{}", name_, id_)) {
  if (name_.empty() || name_.find_first_of(":/") != std::string::npos) {
    DPIPE_THROW(InvalidArgument,
                "a node name must be non-empty and contain neither ':' nor '/' (they separate the keys of a "
                "checkpoint), got \"{}\"",
                name_);
  }
}

DataPipe::DataPipe(const DataPipe& other)
    : std::enable_shared_from_this<DataPipe>(other),
      id_(next_node_id()),
      name_(other.name_),
      label_(other.label_),
      tag_(other.tag_),
      replicable_(other.replicable_) {}

std::vector<DataPipePtr> DataPipe::inputs() {
  std::vector<DataPipePtr> result;
  for_each_input([&](InputSlot& input) { result.push_back(input.target()); });
  return result;
}

std::size_t DataPipe::replace_input(const DataPipe& old, const DataPipePtr& replacement) {
  if (!replacement) DPIPE_THROW(InvalidArgument, "replace_input on {}: the replacement is null", label());
  std::size_t replaced = 0;
  for_each_input([&](InputSlot& input) {
    if (input.target().get() != &old) return;
    if (!input.try_assign(replacement)) {
      DPIPE_THROW(InvalidArgument, "cannot replace input {} of {}: the edge reads {}, but {} is {} of {}", old.label(),
                  label(), input.expected_type(), replacement->label(), kind_name(replacement->kind()),
                  replacement->element_type());
    }
    ++replaced;
  });
  return replaced;
}

bool DataPipe::save_state(StateWriter& /*writer*/) const { return stateless(); }

void DataPipe::load_state(const StateReader& /*reader*/) {
  if (stateless()) return;
  DPIPE_THROW(StateError, "{} does not support checkpoint state: override save_state and load_state", label());
}

namespace detail {

void throw_stale_iterator(const DataPipe& node) {
  DPIPE_THROW(UsageError,
              "This iterator has been invalidated because another iterator has been created from "
              "the same IterDataPipe: {}\nThis may be caused multiple references to the same "
              "IterDataPipe. We recommend using `.fork()` if that is necessary.\nFor feedback regarding "
              "this single iterator per IterDataPipe constraint, feel free to comment on this issue: "
              "https://github.com/pytorch/data/issues/45.",
              node.label());
}

}  // namespace detail
}  // namespace dpipe
