#pragma once
/// \file
/// DataLoader2<T> (torchdata's DataLoader2): owns a copy of a pipeline and of a reading service and
/// runs the pipeline epoch after epoch: `for (auto& batch : loader) train_step(batch);`.
///
/// It follows torchdata's epoch protocol: the service's initialize() at the first iteration,
/// initialize_iteration() at every epoch, finalize_iteration() at the end of an epoch (and on a
/// stale iterator), finalize() at shutdown. Iterating again after any element was taken starts a
/// new epoch; a new iterator invalidates the previous one; an exception from the pipeline shuts the
/// loader down and reaches the caller with its own type.
///
/// Beyond torchdata: state_dict() / load_state_dict() restore exactly mid-epoch (see
/// docs/checkpointing.md); without a reading service the loader still seeds the graph every epoch
/// (torchdata's issue #1107) and still supports pause, resume and limit.
///
/// Thread-safety: one thread uses a loader and its iterators.

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <exception>
#include <filesystem>
#include <functional>
#include <iterator>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/adapter.hpp>
#include <dpipe/core/detail/element_handoff.hpp>
#include <dpipe/core/detail/lazy_iterator.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/map_pipe.hpp>
#include <dpipe/core/root_ops.hpp>
#include <dpipe/core/typed_op.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/iter/fullsync.hpp>
#include <dpipe/iter/prefetch.hpp>
#include <dpipe/iter/shuffle.hpp>
#include <dpipe/loader/detail/pipeline_element.hpp>
#include <dpipe/loader/detail/read_ahead.hpp>
#include <dpipe/loader/loader_core.hpp>
#include <dpipe/loader/progress.hpp>
#include <dpipe/reading_service/reading_service.hpp>

namespace dpipe {

template <class T>
class DataLoader2 {
  struct Reader;

 public:
  /// Reads lazily: inside a range-for body the loader has handed out exactly the elements the body
  /// received (small elements may have been read from the pipeline ahead of the body, in runs: see
  /// docs/dataloader.md; the loader's checkpoint keeps them). Compares equal to end() at the end
  /// of the epoch and while the loader is paused. The loader must outlive it.
  using iterator = detail::LazyIterator<T, Reader>;

  /// A loader over `pipe` (copied), without a reading service.
  explicit DataLoader2(const IterPipe<T>& pipe) : core_(make_core(pipe, {}, nullptr)) {}
  /// A loader over `pipe` (copied), rewritten by `adapters`, without a reading service.
  DataLoader2(const IterPipe<T>& pipe, const std::vector<AdapterPtr>& adapters)
      : core_(make_core_adapted(pipe, adapters, nullptr)) {}
  /// A loader over `pipe` run by a copy of `service`.
  template <std::derived_from<ReadingServiceInterface> Service>
  DataLoader2(const IterPipe<T>& pipe, const Service& service) : core_(make_core<Service>(pipe, {}, &service)) {}
  template <std::derived_from<ReadingServiceInterface> Service>
  DataLoader2(const IterPipe<T>& pipe, const std::vector<AdapterPtr>& adapters, const Service& service)
      : core_(make_core_adapted<Service>(pipe, adapters, &service)) {}
  /// A map pipe is read in key order (torchdata converts it with to_iter_datapipe).
  template <class K>
  explicit DataLoader2(const MapPipe<K, T>& pipe, const std::vector<AdapterPtr>& adapters = {})
      : DataLoader2(pipe.to_iter(), adapters) {}
  template <class K, std::derived_from<ReadingServiceInterface> Service>
  DataLoader2(const MapPipe<K, T>& pipe, const Service& service) : DataLoader2(pipe.to_iter(), service) {}
  /// A pipeline whose elements are not T does not compile: the static assertion names T and the
  /// pipeline's element type (declare the loader as DataLoader2<the pipeline's element type>).
  template <detail::pipe_of_other_element<T> Pipe, class... Rest>
  explicit DataLoader2(const Pipe& /*pipe*/, const Rest&... /*rest*/) {
    static_assert(detail::loader_element_is_pipeline_element<T, typename detail::pipe_element<Pipe>::type>,
                  "DataLoader2<T> must be given a pipeline of T: the note names T, then the pipeline's element type");
  }

  DataLoader2(DataLoader2&&) noexcept = default;
  DataLoader2& operator=(DataLoader2&&) noexcept = default;
  /// Shuts the loader down.
  ~DataLoader2() = default;

  /// Thread-safety: a loader is used by one thread at a time; a call (or an iterator's read from
  /// the pipeline) while another thread is inside the loader throws UsageError instead of racing.

  /// Starts (or, if no element was taken since the last one, joins) an epoch.
  [[nodiscard]] iterator begin();
  [[nodiscard]] std::default_sentinel_t end() const noexcept { return {}; }

  /// The seed of the next epoch (later epochs continue its generator).
  void seed(std::uint64_t seed) {
    const Use use(*this, "seed");
    core_->seed(seed);
  }
  /// Finalizes the reading service and stops background work. Idempotent; iterating afterwards
  /// throws UsageError.
  void shutdown() {
    const Use use(*this, "shutdown");
    core_->shutdown();
  }
  /// Stops after the element just taken: the current iterator compares equal to end() until
  /// resume(). Nothing is lost or repeated.
  void pause() {
    const Use use(*this, "pause");
    core_->pause();
  }
  void resume() {
    const Use use(*this, "resume");
    core_->resume();
  }
  /// Pauses after `num_batches` more elements (std::nullopt: no limit); resume() continues.
  void limit(std::optional<std::size_t> num_batches) {
    const Use use(*this, "limit");
    core_->limit(num_batches);
  }

  /// The loader's state as a versioned byte blob: the elements the loop body has received, the
  /// randomness, and every node's position. Restore it with load_state_dict().
  [[nodiscard]] std::vector<std::byte> state_dict() {
    const Use use(*this, "state_dict");
    std::function<void(ByteWriter&)> write_read_ahead;
    if constexpr (serializable<T>) {
      if (run_.next < run_.elements.size())
        write_read_ahead = [this](ByteWriter& writer) { encode_read_ahead(writer); };
    }
    return core_->state_dict(write_read_ahead, run_.failure != nullptr);
  }
  /// Restores a state_dict() into this loader, built by the same pipeline code (the same stateful
  /// nodes, the same settings of every node, the same fingerprint) and not yet iterated; the next
  /// iteration continues exactly where the saved one stopped. Everything the blob holds is checked
  /// here, the worker processes' parts included (they are started and restored before this
  /// returns): a blob that does not fit throws StateError and leaves the loader as it was.
  void load_state_dict(std::span<const std::byte> blob, const RestoreOptions& options = {}) {
    const Use use(*this, "load_state_dict");
    std::vector<T> read_ahead;
    core_->load_state_dict(blob, options, adopt_read_ahead(read_ahead));
    restored_read_ahead_ = std::move(read_ahead);
  }
  /// Saves the state of every rank of the job into one checkpoint file that rank 0 writes (as
  /// PyTorch trainers save on rank 0 only). A collective: every rank calls it at the same step,
  /// where it would call state_dict(). Each rank's state_dict() travels through the store of the
  /// loader's DistributedReadingService to rank 0, which writes `path` atomically
  /// (save_checkpoint_file); every rank returns once the file is written, or throws the StateError
  /// rank 0 met. A loader without a DistributedReadingService is a job of one rank: it writes
  /// `path` itself.
  void save_job_checkpoint(const std::filesystem::path& path) {
    const Use use(*this, "save_job_checkpoint");
    core_->save_job_checkpoint(path, state_dict());
  }
  /// Restores this rank's part of a save_job_checkpoint() file, as load_state_dict() does. A
  /// collective: every rank calls it before its first iteration. Rank 0 reads `path` (the other
  /// ranks need not see the file) and hands each rank its state through the store. A file saved
  /// by a job of another world size, or a single loader's checkpoint, is a StateError on every
  /// rank.
  void load_job_checkpoint(const std::filesystem::path& path, const RestoreOptions& options = {}) {
    const Use use(*this, "load_job_checkpoint");
    std::vector<T> read_ahead;
    core_->load_job_checkpoint(path, options, adopt_read_ahead(read_ahead));
    restored_read_ahead_ = std::move(read_ahead);
  }
  /// A text of the user's own for what dpipe cannot see of the pipeline (what a map's function
  /// does: "augment v2"), saved in every checkpoint; load_state_dict() refuses a checkpoint saved
  /// with another one. Set it before load_state_dict(). Empty by default.
  void set_fingerprint(std::string fingerprint) {
    const Use use(*this, "set_fingerprint");
    core_->set_fingerprint(std::move(fingerprint));
  }

  /// The graph as the adapters left it, before the reading service rewrote it.
  [[nodiscard]] graph::DataPipeGraph graph_before_reading_service() const {
    const detail::LoaderUse use(*core_, "graph_before_reading_service");
    return graph::traverse_dps(core_->graph_before_reading_service());
  }
  /// The graph being run (after the reading service's initialize, once iterated).
  [[nodiscard]] graph::DataPipeGraph graph() const {
    const detail::LoaderUse use(*core_, "graph");
    return graph::traverse_dps(core_->root());
  }
  /// The loader's copy of the reading service, or nullptr.
  [[nodiscard]] ReadingServiceInterface* reading_service() const noexcept { return core_->reading_service(); }
  /// Epochs started so far, and elements handed out in the current one. After load_state_dict(),
  /// before the next iteration, they are the restored ones: the epoch the checkpoint was saved in
  /// (which the next iteration continues, or follows when it had ended) and its elements.
  [[nodiscard]] std::uint64_t epoch() const {
    const detail::LoaderUse use(*core_, "epoch");
    return core_->epoch();
  }
  [[nodiscard]] std::uint64_t elements_in_epoch() const {
    const detail::LoaderUse use(*core_, "elements_in_epoch");
    return core_->elements_in_epoch() + (run_.next - run_.counted);
  }

  /// How many elements an epoch yields with this loader's reading service and worker count, when
  /// the pipeline's lengths tell (the source's length is known and nothing in between filters);
  /// std::nullopt otherwise. Worked out on a copy of the pipeline: nothing starts. With worker
  /// processes, each worker batches its own shard, so a batch() in the workers' branch yields a
  /// short last batch per worker (docs/dataloader.md).
  [[nodiscard]] std::optional<std::size_t> epoch_length() const {
    const detail::LoaderUse use(*core_, "epoch_length");
    return core_->epoch_length();
  }
  /// Reports progress every `options.interval` while the loader runs (elements/s, the position in
  /// the epoch, the nodes of this process that take the time), and once at the end of each
  /// epoch; std::nullopt stops. Off by default; when off it costs nothing per element.
  void report_progress(std::optional<ProgressOptions> options = ProgressOptions{}) {
    const Use use(*this, "report_progress");
    core_->report_progress(std::move(options));
  }

 private:
  using Clock = std::chrono::steady_clock;

  /// Elements read from the root ahead of the trainer (see detail::ReadAhead). The iterator hands
  /// them out without asking the core up to `stop`, the window the core last granted.
  struct Run {
    std::vector<T> elements;
    std::size_t next = 0;        // the next element to hand out
    std::size_t stop = 0;        // the end of the granted window
    std::size_t counted = 0;     // the core has counted the elements before this one
    std::exception_ptr failure;  // what the root threw after `elements`
    bool ended = false;          // the root's stream ended after `elements`
    std::uint64_t iterator = 0;  // the iterator the window was granted to
  };

  /// One public operation: enters the loader, has the core count what the iterator handed out,
  /// and closes the iterator's window so that its next read asks the core again.
  class Use {
   public:
    Use(DataLoader2& loader, const char* operation) : use_(*loader.core_, operation) { loader.settle(); }

   private:
    detail::LoaderUse use_;
  };

  /// Registers the typed operations a reading service of type Service may apply to the root for T
  /// (ops::AppendPrefetch and ops::AppendFullSync, as Service::kRootOps allows), then builds the
  /// protocol.
  template <class Service = void>
  static std::unique_ptr<detail::LoaderCore> make_core(const IterPipe<T>& pipe, const std::vector<AdapterPtr>& adapters,
                                                       const ReadingServiceInterface* service) {
    if constexpr (!std::is_void_v<Service>) {
      if constexpr (Service::kRootOps.prefetch) {
        register_typed_op_once<ops::AppendPrefetch, T, &append_node<iter::Prefetcher, T, std::size_t>>();
      }
      if constexpr (Service::kRootOps.fullsync) {
        register_typed_op_once<ops::AppendFullSync, T, &append_node<iter::FullSync, T, std::chrono::milliseconds>>();
      }
    }
    return std::make_unique<detail::LoaderCore>(pipe.ptr(), adapters, service);
  }
  /// make_core for a loader with adapters, which may append a shuffle (ops::AppendShuffle).
  template <class Service = void>
  static std::unique_ptr<detail::LoaderCore> make_core_adapted(const IterPipe<T>& pipe,
                                                               const std::vector<AdapterPtr>& adapters,
                                                               const ReadingServiceInterface* service) {
    register_typed_op_once<ops::AppendShuffle, T, &append_node<iter::Shuffler, T, std::size_t>>();
    return make_core<Service>(pipe, adapters, service);
  }

  /// The typed root, checked once per change of the graph.
  IterDataPipe<T>& root() {
    if (root_version_ != core_->root_version() || root_ == nullptr) {
      root_ = dynamic_cast<IterDataPipe<T>*>(core_->root().get());
      if (root_ == nullptr) detail::throw_loader_type_mismatch(*core_->root(), type_name<T>());
      root_version_ = core_->root_version();
    }
    return *root_;
  }

  /// Has the core count the elements handed out since it last counted, and closes the window.
  void settle() {
    if (run_.next > run_.counted) {
      core_->handed_out(run_.next - run_.counted);
      run_.counted = run_.next;
    }
    run_.stop = run_.next;
  }

  /// The next element through iterator `id`, where the run keeps it (valid until the next read):
  /// from the granted window of the run, else through the core; nullptr at the end and while
  /// paused.
  T* next(std::uint64_t id) {
    if (id == run_.iterator && run_.next < run_.stop) [[likely]]
      return &run_.elements[run_.next++];
    return next_granted(id);
  }

  T* next_granted(std::uint64_t id) {
    const Use use(*this, "iterator increment");
    const std::uint64_t granted = core_->grant(id);
    if (granted == 0) return nullptr;  // paused
    if (run_.next == run_.elements.size() && !run_.failure && !run_.ended) read_run(granted);
    if (run_.next < run_.elements.size()) {
      run_.iterator = id;
      run_.stop =
          run_.next + static_cast<std::size_t>(std::min<std::uint64_t>(granted, run_.elements.size() - run_.next));
      return &run_.elements[run_.next++];
    }
    if (run_.failure) {
      const std::exception_ptr failure = std::exchange(run_.failure, nullptr);
      core_->fail();
      std::rethrow_exception(failure);
    }
    core_->reached_end();
    return nullptr;
  }

  /// Reads the next run from the root: as many elements as read_ahead_ says, within `granted`.
  void read_run(std::uint64_t granted) {
    run_.elements.clear();
    run_.next = run_.stop = run_.counted = 0;
    const auto wanted = static_cast<std::size_t>(std::min<std::uint64_t>(granted, read_ahead_.length()));
    const bool timed = read_ahead_.timed();
    const auto start = timed ? Clock::now() : Clock::time_point{};
    std::size_t got = 0;
    try {
      const ScopedHostAllocator allocator(core_->host_allocator());
      got = root().pull(run_.elements, wanted);
    } catch (...) {
      run_.failure = std::current_exception();  // handed out after the elements before it
      return;
    }
    run_.ended = got < wanted;
    if (!timed) {
      read_ahead_.ran_untimed();
    } else if (got > 0) {
      read_ahead_.ran(got, Clock::now() - start, detail::held_bytes(run_.elements.front()));
    }
  }

  /// Starts the run of a new iteration: empty, or what a restored checkpoint had read ahead. The
  /// element the previous iteration handed out last lives on until the next start (a body that
  /// began a new iteration may still hold it).
  void start_run() {
    retired_ = std::exchange(run_, Run{}).elements;
    run_.elements = std::exchange(restored_read_ahead_, {});
    run_iteration_ = core_->iteration();
  }

  void encode_read_ahead(ByteWriter& writer) const {
    writer.write_size(run_.elements.size() - run_.next);
    for (std::size_t i = run_.next; i < run_.elements.size(); ++i) writer.write(run_.elements[i]);
  }

  /// How a restore hands the elements read ahead that a checkpoint holds to `read_ahead`.
  static std::function<void(ByteReader&)> adopt_read_ahead(std::vector<T>& read_ahead) {
    return [&read_ahead](ByteReader& reader) { read_ahead = decode_read_ahead(reader); };
  }

  static std::vector<T> decode_read_ahead(ByteReader& reader) {
    std::vector<T> elements;
    if constexpr (serializable<T>) {
      const std::size_t count = reader.read_count(1);
      elements.reserve(count);
      for (std::size_t i = 0; i < count; ++i) elements.push_back(reader.read<T>());
    } else {
      DPIPE_THROW(StateError, "the checkpoint holds elements read ahead, and {} has no Serializer to decode them",
                  type_name<T>());
    }
    return elements;
  }

  /// How the iterator reads: through the loader, with the iterator's id.
  struct Reader {
    DataLoader2* loader;
    std::uint64_t id;
    T* read_in_place() { return loader->next(id); }
    [[nodiscard]] bool end_is_final() const noexcept { return !loader->core_->paused(); }
  };

  std::unique_ptr<detail::LoaderCore> core_;
  IterDataPipe<T>* root_ = nullptr;
  std::uint64_t root_version_ = 0;
  Run run_;
  std::uint64_t run_iteration_ = 0;
  std::vector<T> restored_read_ahead_;  // from load_state_dict(), handed out first
  std::vector<T> retired_;              // the previous iteration's run (see start_run())
  detail::ReadAhead read_ahead_{serializable<T>};
};

template <class T>
typename DataLoader2<T>::iterator DataLoader2<T>::begin() {
  const Use use(*this, "begin");
  const std::uint64_t id = core_->start_iterator();
  if (core_->iteration() != run_iteration_) start_run();
  for (std::uint64_t skip = core_->take_replay(); skip > 0; --skip) {
    try {
      if (!root().next()) break;
    } catch (...) {
      core_->fail();
      throw;
    }
  }
  return iterator(Reader{this, id});
}

}  // namespace dpipe
