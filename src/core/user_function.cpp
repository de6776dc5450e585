// The note of which node's function raised an exception.

#include <dpipe/core/detail/user_function.hpp>

namespace dpipe::detail {

namespace {

/// The last exception a node's function raised on this thread, and that node's label.
struct FailureNote {
  std::exception_ptr exception;
  std::string node;
};

FailureNote& failure_note() {
  thread_local FailureNote note;
  return note;
}

}  // namespace

void note_failing_node(const DataPipe& node) noexcept {
  FailureNote& note = failure_note();
  std::exception_ptr current = std::current_exception();
  if (current == note.exception) return;
  try {
    note.node = node.label();
    note.exception = std::move(current);
  } catch (...) {
    // Out of memory for the label: the exception leaves without a note.
    note = FailureNote{};
  }
}

std::string take_failing_node(const std::exception_ptr& exception) {
  FailureNote& note = failure_note();
  if (!exception || exception != note.exception) return {};
  FailureNote taken = std::move(note);
  note = FailureNote{};
  return std::move(taken.node);
}

}  // namespace dpipe::detail
