// One rank of a distributed test job: a trainer-like program that finds its place from its
// launcher's environment, runs a small pipeline through DataLoader2 with
// DistributedReadingService (and worker processes or threads), and prints what it received, one
// line per epoch ("epoch 0: 17 12 3"). The distributed tests start it as separate processes, with
// each launcher's environment. Failures print "error <type>: <message>" and exit with 3.
//
// dpipe_rank_program <pipeline> [--seed S] [--epochs E] [--workers N] [--threads] [--timeout-ms T]
//   [--block B] [--stop-after K] [--save-after K FILE] [--load FILE] [--fail-after K]
//   [--kill-after K] [--second-loader] [--slow-ms M] [--slow-after K] [--report-received]
//   [--job-checkpoint] [--print-length]
// Pipelines: "sharded" range(23).sharding_filter(); "shuffled" range(23).shuffle().sharding_filter();
// "shuffled4" shuffled + shuffle(4); "large" range(41).shuffle().sharding_filter(); "large4" large +
// shuffle(4); "plain41" range(41).sharding_filter(); "long" range(10000).shuffle().sharding_filter();
// "huge" range(400000).sharding_filter().
// --fail-after K: the pipeline of this rank throws on its K-th element (0-based) when the
// environment variable DPIPE_TEST_FAIL_RANK names this rank; --kill-after K: this rank SIGKILLs
// itself after receiving K elements when DPIPE_TEST_KILL_RANK names it. In FILE, "{rank}" stands
// for this rank and "{peer}" for the next one. --second-loader: a second loader of the same
// pipeline (seed S + 1) is read in turn with the first, and printed on its own lines. --slow-ms M:
// the rank named by DPIPE_TEST_SLOW_RANK takes M ms per element (a slow training step), from its
// K-th element on with --slow-after K. --report-received: a failure first prints "received N", the
// elements received before it. With DPIPE_TEST_LOAD_RANK set, only the rank it names loads FILE.
// --job-checkpoint: --save-after and --load use the job's one checkpoint file
// (DataLoader2::save_job_checkpoint / load_job_checkpoint) instead of a file per rank.
// --print-length: prints "length N" (DataLoader2::epoch_length(), "unknown" when unknown) first.
// Built as dpipe_c10d_rank_program (DPIPE_TEST_C10D, where libtorch is found), the loaders use
// torch.distributed's store, a c10d::TCPStore that rank 0 serves on MASTER_PORT, through C10dStore.

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <optional>
#include <stdexcept>
#include <string>
#include <thread>
#include <typeinfo>
#include <vector>

#include <dpipe/dpipe.hpp>

#ifdef DPIPE_TEST_C10D
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

#include <dpipe/torch/c10d_store.hpp>
#endif

namespace {

struct Arguments {
  std::string pipeline;
  std::optional<std::uint64_t> seed;
  std::size_t epochs = 1;
  std::size_t workers = 0;
  bool threads = false;
  std::chrono::milliseconds timeout{20000};
  std::size_t block = 1024;
  std::optional<std::size_t> stop_after;
  std::optional<std::size_t> save_after;
  std::string save_file;
  std::string load_file;
  std::optional<std::size_t> fail_after;
  std::optional<std::size_t> kill_after;
  bool second_loader = false;
  std::chrono::milliseconds slow{0};
  bool job_checkpoint = false;
  bool print_length = false;
  std::size_t slow_after = 0;
  bool report_received = false;
};

/// Elements received so far, for --report-received.
std::size_t received = 0;

Arguments parse(int argc, char** argv) {
  Arguments arguments;
  if (argc < 2) throw std::invalid_argument("usage: dpipe_rank_program <pipeline> [options]");
  arguments.pipeline = argv[1];
  for (int i = 2; i < argc; ++i) {
    const std::string flag = argv[i];
    const auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw std::invalid_argument(flag + " needs a value");
      return argv[++i];
    };
    if (flag == "--seed") {
      arguments.seed = std::stoull(value());
    } else if (flag == "--epochs") {
      arguments.epochs = std::stoul(value());
    } else if (flag == "--workers") {
      arguments.workers = std::stoul(value());
    } else if (flag == "--threads") {
      arguments.threads = true;
    } else if (flag == "--timeout-ms") {
      arguments.timeout = std::chrono::milliseconds(std::stoll(value()));
    } else if (flag == "--block") {
      arguments.block = std::stoul(value());
    } else if (flag == "--stop-after") {
      arguments.stop_after = std::stoul(value());
    } else if (flag == "--save-after") {
      arguments.save_after = std::stoul(value());
      arguments.save_file = value();
    } else if (flag == "--load") {
      arguments.load_file = value();
    } else if (flag == "--fail-after") {
      arguments.fail_after = std::stoul(value());
    } else if (flag == "--kill-after") {
      arguments.kill_after = std::stoul(value());
    } else if (flag == "--second-loader") {
      arguments.second_loader = true;
    } else if (flag == "--job-checkpoint") {
      arguments.job_checkpoint = true;
    } else if (flag == "--print-length") {
      arguments.print_length = true;
    } else if (flag == "--slow-ms") {
      arguments.slow = std::chrono::milliseconds(std::stoll(value()));
    } else if (flag == "--slow-after") {
      arguments.slow_after = std::stoul(value());
    } else if (flag == "--report-received") {
      arguments.report_received = true;
    } else {
      throw std::invalid_argument("unknown flag " + flag);
    }
  }
  return arguments;
}

/// Whether the environment variable `name` names this process's rank.
bool names_this_rank(const char* name, std::size_t rank) {
  const char* value = std::getenv(name);
  return value != nullptr && std::stoul(value) == rank;
}

std::vector<std::int64_t> range(std::int64_t n) {
  std::vector<std::int64_t> values(static_cast<std::size_t>(n));
  std::iota(values.begin(), values.end(), 0);
  return values;
}

dpipe::IterPipe<std::int64_t> make_pipeline(const Arguments& arguments, std::size_t rank) {
  const std::string& name = arguments.pipeline;
  dpipe::IterPipe<std::int64_t> pipe;
  if (name == "sharded") {
    pipe = dpipe::iter::from(range(23)).sharding_filter();
  } else if (name == "shuffled" || name == "shuffled4") {
    pipe = dpipe::iter::from(range(23)).shuffle().sharding_filter();
  } else if (name == "large" || name == "large4") {
    pipe = dpipe::iter::from(range(41)).shuffle().sharding_filter();
  } else if (name == "plain41") {
    pipe = dpipe::iter::from(range(41)).sharding_filter();
  } else if (name == "long") {
    pipe = dpipe::iter::from(range(10000)).shuffle().sharding_filter();
  } else if (name == "huge") {
    pipe = dpipe::iter::from(range(400000)).sharding_filter();
  } else {
    throw std::invalid_argument("unknown pipeline " + name);
  }
  if (name.ends_with('4')) pipe = pipe.shuffle(4);
  if (arguments.fail_after && names_this_rank("DPIPE_TEST_FAIL_RANK", rank)) {
    auto count = std::make_shared<std::atomic<std::size_t>>(0);
    pipe = pipe.map([count, limit = *arguments.fail_after](std::int64_t x) {
      if (count->fetch_add(1) == limit) throw std::runtime_error("sample " + std::to_string(x) + " is corrupt");
      return x;
    });
  }
  return pipe;
}

#ifdef DPIPE_TEST_C10D
/// torch.distributed's store as a trainer under torchrun has it: rank 0 serves a c10d::TCPStore on
/// MASTER_PORT. One per process, shared by its loaders.
std::shared_ptr<dpipe::Store> c10d_store(std::chrono::milliseconds timeout) {
  static const auto store = [timeout] {
    const auto environment = dpipe::detect_launch_environment();
    ::c10d::TCPStoreOptions options;
    options.port = static_cast<std::uint16_t>(std::stoul(std::getenv("MASTER_PORT")));
    options.isServer = environment.rank == 0;
    options.numWorkers = environment.world_size;
    options.waitWorkers = false;
    options.timeout = timeout;
    return std::make_shared<dpipe::C10dStore>(
        c10::make_intrusive<::c10d::TCPStore>(std::getenv("MASTER_ADDR"), options));
  }();
  return store;
}

/// Waits until every rank arrives here; rank 0, whose process serves the store, also until every
/// other rank is done with the store (one still waiting for its answer would meet a closed
/// connection).
void c10d_barrier(std::chrono::milliseconds timeout) {
  const auto store = c10d_store(timeout);
  const auto environment = dpipe::detect_launch_environment();
  const auto world = static_cast<std::int64_t>(environment.world_size);
  if (store->add("rank_program/done", 1) == world) store->set("rank_program/all done", std::string_view("yes"));
  store->wait({"rank_program/all done"});
  if (world == 1) return;
  if (environment.rank == 0) {
    store->wait({"rank_program/all left"});
  } else if (store->add("rank_program/left", 1) == world - 1) {
    store->set("rank_program/all left", std::string_view("yes"));
  }
}
#endif

dpipe::DataLoader2<std::int64_t> make_loader(const Arguments& arguments, const dpipe::IterPipe<std::int64_t>& pipe) {
  dpipe::DistributedOptions options;
#ifdef DPIPE_TEST_C10D
  options.store = c10d_store(arguments.timeout);
#endif
  options.timeout = arguments.timeout;
  options.fullsync_block = arguments.block;
  const dpipe::DistributedReadingService distributed(options);
  if (arguments.workers == 0) return dpipe::DataLoader2<std::int64_t>(pipe, distributed);
  dpipe::MultiProcessingOptions workers;
  workers.num_workers = arguments.workers;
  workers.worker_kind = arguments.threads ? dpipe::WorkerKind::kThread : dpipe::WorkerKind::kProcess;
  return dpipe::DataLoader2<std::int64_t>(
      pipe, dpipe::SequentialReadingService(distributed, dpipe::MultiProcessingReadingService(workers)));
}

/// `pattern` with "{rank}" and "{peer}" replaced.
std::string file_for(std::string pattern, const dpipe::LaunchEnvironment& environment) {
  const auto replace = [&](const std::string& token, std::size_t value) {
    const auto at = pattern.find(token);
    if (at != std::string::npos) pattern.replace(at, token.size(), std::to_string(value));
  };
  replace("{rank}", environment.rank);
  replace("{peer}", (environment.rank + 1) % environment.world_size);
  return pattern;
}

/// Reads two loaders in turn, an element of each at a time, and prints each one's epochs.
int run_two_loaders(const Arguments& arguments, const dpipe::IterPipe<std::int64_t>& pipe) {
  auto first = make_loader(arguments, pipe);
  auto second = make_loader(arguments, pipe);
  first.seed(arguments.seed.value_or(0));
  second.seed(arguments.seed.value_or(0) + 1);
  for (std::size_t epoch = 0; epoch < arguments.epochs; ++epoch) {
    std::string lines[2] = {"loader 1 epoch " + std::to_string(epoch) + ":",
                            "loader 2 epoch " + std::to_string(epoch) + ":"};
    auto a = first.begin();
    auto b = second.begin();
    while (a != first.end() || b != second.end()) {
      if (a != first.end()) {
        lines[0] += " " + std::to_string(*a);
        ++a;
      }
      if (b != second.end()) {
        lines[1] += " " + std::to_string(*b);
        ++b;
      }
    }
    std::printf("%s\n%s\n", lines[0].c_str(), lines[1].c_str());
  }
  return 0;
}

/// Saves the loader's checkpoint as the arguments say: the job's one file, or a file per rank.
void save(dpipe::DataLoader2<std::int64_t>& loader, const Arguments& arguments,
          const dpipe::LaunchEnvironment& environment) {
  if (arguments.job_checkpoint) {
    loader.save_job_checkpoint(arguments.save_file);
  } else {
    dpipe::save_checkpoint_file(file_for(arguments.save_file, environment), loader.state_dict());
  }
}

int run(const Arguments& arguments) {
  const auto environment = dpipe::detect_launch_environment();
  const auto pipe = make_pipeline(arguments, environment.rank);
  if (arguments.second_loader) return run_two_loaders(arguments, pipe);
  auto loader = make_loader(arguments, pipe);
  if (arguments.seed) loader.seed(*arguments.seed);
  if (arguments.print_length) {
    const auto length = loader.epoch_length();
    std::printf("length %s\n", length ? std::to_string(*length).c_str() : "unknown");
  }
  const bool loads =
      std::getenv("DPIPE_TEST_LOAD_RANK") == nullptr || names_this_rank("DPIPE_TEST_LOAD_RANK", environment.rank);
  if (arguments.job_checkpoint && !arguments.load_file.empty()) {
    loader.load_job_checkpoint(arguments.load_file);
  } else if (!arguments.load_file.empty() && loads) {
    loader.load_state_dict(dpipe::load_checkpoint_file(file_for(arguments.load_file, environment)));
  }
  if (arguments.save_after == 0) {
    save(loader, arguments, environment);
    std::printf("saved after 0\n");
    return 0;
  }
  const bool kills = arguments.kill_after && names_this_rank("DPIPE_TEST_KILL_RANK", environment.rank);
  const bool slow = names_this_rank("DPIPE_TEST_SLOW_RANK", environment.rank);
  for (std::size_t epoch = 0; epoch < arguments.epochs; ++epoch) {
    std::string line = "epoch " + std::to_string(epoch) + ":";
    for (const std::int64_t x : loader) {
      line += " " + std::to_string(x);
      ++received;
      if (slow && received > arguments.slow_after) std::this_thread::sleep_for(arguments.slow);  // the training step
      if (kills && received == *arguments.kill_after) {
        std::fflush(stdout);
        std::raise(SIGKILL);
      }
      if (arguments.save_after && received == *arguments.save_after) {
        save(loader, arguments, environment);
        std::printf("%s\nsaved after %zu\n", line.c_str(), received);
        return 0;
      }
      if (arguments.stop_after && received == *arguments.stop_after) {
        std::printf("%s\nstopped after %zu\n", line.c_str(), received);
        return 0;
      }
    }
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Arguments arguments;
  try {
    arguments = parse(argc, argv);
    const int code = run(arguments);
#ifdef DPIPE_TEST_C10D
    // A torch.distributed trainer ends with a barrier: rank 0's store outlives every rank's last round.
    if (code == 0) c10d_barrier(arguments.timeout);
#endif
    return code;
  } catch (const dpipe::Error& error) {
    if (arguments.report_received) std::printf("received %zu\n", received);
    std::printf("error %s: %s\n", dpipe::detail::demangle(typeid(error).name()).c_str(), error.what());
  } catch (const std::exception& error) {
    if (arguments.report_received) std::printf("received %zu\n", received);
    std::printf("error %s: %s\n", dpipe::detail::demangle(typeid(error).name()).c_str(), error.what());
  }
  return 3;
}
