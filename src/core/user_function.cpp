// The note of which node's function raised an exception.

#include <exception>

#include <dpipe/core/detail/user_function.hpp>

namespace dpipe::detail {

namespace {

/// The last exception a node's function raised on this thread, by address (the note owns
/// nothing: the exception lives and dies where its handlers let it), and that node's label.
struct FailureNote {
  const void* exception = nullptr;
  std::string node;
};

FailureNote& failure_note() {
  thread_local FailureNote note;
  return note;
}

/// The address of the exception `exception` holds, or null for one not derived from
/// std::exception (those are not noted).
const void* address_of(const std::exception_ptr& exception) noexcept {
  try {
    std::rethrow_exception(exception);
  } catch (const std::exception& error) {
    return &error;
  } catch (...) {
    return nullptr;
  }
}

}  // namespace

void note_failing_node(const DataPipe& node) noexcept {
  FailureNote& note = failure_note();
  const void* current = address_of(std::current_exception());
  if (current == nullptr || current == note.exception) return;
  try {
    note.node = node.label();
    note.exception = current;
  } catch (...) {
    // Out of memory for the label: the exception leaves without a note.
    note = FailureNote{};
  }
}

std::string take_failing_node(const std::exception_ptr& exception) {
  FailureNote& note = failure_note();
  const void* address = exception ? address_of(exception) : nullptr;
  std::string node = address != nullptr && address == note.exception ? std::move(note.node) : std::string();
  note = FailureNote{};
  return node;
}

void forget_failing_node() noexcept { failure_note() = FailureNote{}; }

}  // namespace dpipe::detail
