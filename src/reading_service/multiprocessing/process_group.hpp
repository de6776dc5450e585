#pragma once
// ProcessGroup: the workers and the dispatching child of one MultiProcessingReadingService,
// processes or threads (a Crew), the shared memory they talk through, and the main process's side
// of their protocol (protocol.hpp), the same for both. Private to the library.

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <sys/types.h>
#include <vector>

#include <dpipe/global/global_epoch.hpp>
#include <dpipe/random/seed_generator.hpp>

#include "reading_service/multiprocessing/plan.hpp"
#include "transport/crew.hpp"
#include "transport/error_report.hpp"
#include "transport/record_merge.hpp"
#include "transport/record_stream.hpp"
#include "transport/shared_pool.hpp"

namespace dpipe::detail::mp {

/// Thread-safety: one thread at a time (the loader's, or the thread iterating the merge while the
/// loader's thread waits).
class ProcessGroup {
 public:
  /// Starts the children `plan` describes (forks them, or starts threads); they continue from
  /// `restored` when given.
  ProcessGroup(const GroupPlan& plan, const GroupState* restored);
  /// Stops the processes (stop()).
  ~ProcessGroup();
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  /// The main process's reader of the workers' elements.
  [[nodiscard]] const std::shared_ptr<WorkerMerge>& merge() const noexcept { return merge_; }

  /// Starts epoch e (from 0): worker w is seeded with `epoch_seeds.spawn(w + N * e)`, the
  /// dispatching process with `epoch_seeds.spawn(0).spawn(0)` past e epochs' draws. When the
  /// caller gives new seeds every epoch (`reseeded`: a distributed service reseeds them), e is
  /// taken as 0 in every epoch, as torchdata does.
  void reset(const SeedGenerator& epoch_seeds, bool reseeded = false,
             const std::optional<GlobalEpoch>& global = std::nullopt);
  /// Asks every process to pause after its current element (it does not wait).
  void pause();
  void resume();
  /// Pauses the processes, reads what is in flight into the merge and collects every process's
  /// state. The processes stay paused. Throws StateNotSupportedError when a node in a child cannot
  /// save its state.
  GroupState checkpoint();
  /// Makes every wait of the main process's side throw UsageError from now on (a thread of the
  /// main process's graph blocked on a worker returns at once).
  void interrupt() noexcept;
  /// Tells the children to exit, and ends those that have not after two seconds: kills a process,
  /// detaches a thread (keeping what it uses alive for good). Idempotent.
  void stop() noexcept;

  [[nodiscard]] std::vector<pid_t> worker_pids() const;
  [[nodiscard]] std::optional<pid_t> dispatcher_pid() const;

 private:
  void send(RingWriter& control, std::size_t child, const std::vector<std::byte>& message);
  void send_all(const std::vector<std::byte>& message);
  /// Waits for every child's answer to its restore; throws StateError for the first that cannot
  /// restore its part of the checkpoint, after reading them all.
  void await_restored();
  [[nodiscard]] ChildSlot& slot(std::size_t child) const;  // workers, then the dispatcher
  [[nodiscard]] Endpoint endpoint() {
    return Endpoint{&pool_.main_bell(), &crew_, plan_.config.timeout, nullptr, plan_.config.stall_warning};
  }

  /// What the merge needs too: it keeps them alive while the main process's graph holds it.
  /// Threads read the plan too, and may outlive the group (see stop()).
  struct Resources {
    explicit Resources(const GroupPlan& group_plan);
    GroupPlan plan;
    SharedPool pool;
    std::unique_ptr<ExceptionSlot[]> exceptions;       // threads: one per child; else null
    std::vector<std::shared_ptr<TensorArena>> arenas;  // per worker process, when the plan has them
    std::unique_ptr<Crew> crew;                        // destroyed before pool: no child outlives the memory's owner
    std::uint64_t generation = 0;                      // the epochs started (see protocol.hpp)
  };

  std::shared_ptr<Resources> resources_;
  const GroupPlan& plan_;
  SharedPool& pool_;
  Crew& crew_;
  std::uint64_t& generation_;
  std::vector<RingWriter> controls_;  // one per worker, then the dispatcher's
  std::shared_ptr<WorkerMerge> merge_;
  std::optional<RecordStream> dispatcher_replies_;
  std::uint64_t request_ = 0;
  bool stopped_ = false;
};

}  // namespace dpipe::detail::mp
