// ChildLiveness, ControlReader, and exception reports.

#include "child_process.hpp"

#include <cxxabi.h>
#include <exception>
#include <typeinfo>
#include <unistd.h>

#include <dpipe/core/error.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/graph/state.hpp>

#include "worker_context.hpp"

namespace dpipe::detail::mp {
namespace {

struct ChildCheckpoint {
  ChildProgress progress;
  WorkerRandomState random;
  std::vector<std::byte> graph;
  DPIPE_FIELDS(progress, random, graph)
};

}  // namespace

void ChildLiveness::check(bool thorough) {
  if (stop_requested()) throw Interrupted{};
  if (thorough && getppid() != parent_) _exit(1);  // the main process died: nobody reads this child
}

std::optional<ControlMessage> ControlReader::poll() {
  const auto record = reader_.peek();
  if (!record) return std::nullopt;
  if (record->kind != RecordKind::kControl) {
    DPIPE_THROW(Error, "dpipe internal error: a control ring holds a record of kind {}",
                static_cast<int>(record->kind));
  }
  auto message = from_bytes<ControlMessage>(record->payload);
  if (reader_.release(*record)) main_bell_->ring();
  return message;
}

ErrorReport report_current_exception(const std::string& where) {
  try {
    throw;
  } catch (const WorkerError& error) {
    return ErrorReport{error.where(), error.original_type(), error.original_message()};  // relayed
  } catch (const std::exception& error) {
    return ErrorReport{where, demangle(typeid(error).name()), error.what()};
  } catch (...) {
    const std::type_info* type = abi::__cxa_current_exception_type();
    return ErrorReport{where, type != nullptr ? demangle(type->name()) : "an unknown exception",
                       "(not a std::exception)"};
  }
}

std::vector<std::byte> save_child(const ChildProgress& progress, const DataPipePtr& root) {
  return to_bytes(ChildCheckpoint{progress, worker_random_state(), graph::save_state(root)});
}

void restore_child(std::span<const std::byte> blob, ChildProgress& progress, const DataPipePtr& root) {
  ChildCheckpoint checkpoint;
  try {
    checkpoint = from_bytes<ChildCheckpoint>(blob);
  } catch (const SerializationError& error) {
    DPIPE_THROW(StateError, "the checkpoint of this process is corrupt: {}", error.what());
  }
  progress = checkpoint.progress;
  set_worker_random_state(checkpoint.random);
  graph::load_state(root, checkpoint.graph);
  dynamic_cast<IterDataPipeBase&>(*root).reset();  // continues the restored iteration
}

}  // namespace dpipe::detail::mp
