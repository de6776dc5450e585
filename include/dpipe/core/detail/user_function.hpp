#pragma once
/// \file
/// call_user_function: how a node calls its user's function (map's fn, filter's predicate, ...),
/// so that a service can say which node's function raised an exception: a worker process's
/// WorkerError names that node. The note costs nothing until a function throws.

#include <exception>
#include <functional>
#include <string>
#include <utility>

#include <dpipe/core/datapipe.hpp>

namespace dpipe::detail {

/// Notes that the exception being handled (call it in a catch block) came from the function of
/// `node`, unless it is already noted as coming from another node's (an inner node's function
/// raised it first). The note names the exception by its address and keeps nothing alive; only
/// exceptions derived from std::exception are noted. Thread-safety: one note per thread.
void note_failing_node(const DataPipe& node) noexcept;

/// The label of the node whose function raised `exception`, as noted on this thread, or "" when
/// none was noted for it. Forgets the note.
[[nodiscard]] std::string take_failing_node(const std::exception_ptr& exception);

/// Forgets this thread's note. A loop that reports its exceptions calls it before each run of
/// work, so that a note of an exception that was caught and dropped since (its address free for
/// another) cannot name a node for a later one.
void forget_failing_node() noexcept;

/// fn(args...), called by `node`: an exception leaves as it is, noted as `node`'s.
template <class F, class... Args>
decltype(auto) call_user_function(const DataPipe& node, F&& fn, Args&&... args) {
  try {
    return std::invoke(std::forward<F>(fn), std::forward<Args>(args)...);
  } catch (...) {
    note_failing_node(node);
    throw;
  }
}

}  // namespace dpipe::detail
