// Reading a process's place in a distributed job from its launcher's environment.

#include <charconv>
#include <cstdlib>
#include <string>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <dpipe/core/error.hpp>
#include <dpipe/distributed/launch_environment.hpp>

extern char** environ;  // NOLINT: POSIX, for reading the whole environment

namespace dpipe {
namespace {

/// The variables a launcher sets; nullptr where it sets none.
struct LauncherVariables {
  Launcher launcher;
  const char* rank;
  const char* world_size;
  const char* local_rank;
  const char* job_id;
};

// In this order: a launcher started under another one (mpirun inside a Slurm allocation)
// overrides the outer one's variables only in part, so the innermost launcher's come first.
constexpr LauncherVariables kLaunchers[] = {
    {Launcher::kTorchrun, "RANK", "WORLD_SIZE", "LOCAL_RANK", "TORCHELASTIC_RUN_ID"},
    {Launcher::kOpenMpi, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK", nullptr},
    {Launcher::kPmi, "PMI_RANK", "PMI_SIZE", nullptr, nullptr},
    {Launcher::kSlurm, "SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_JOB_ID"},
};

class Environment {
 public:
  explicit Environment(const std::map<std::string, std::string>& variables) : variables_(variables) {}

  [[nodiscard]] const std::string* find(const char* name) const {
    if (name == nullptr) return nullptr;
    const auto it = variables_.find(name);
    return it == variables_.end() || it->second.empty() ? nullptr : &it->second;
  }

  /// The variable as a non-negative integer, if set.
  [[nodiscard]] std::optional<std::uint64_t> number(const char* name) const {
    const std::string* text = find(name);
    if (text == nullptr) return std::nullopt;
    std::uint64_t value = 0;
    const auto [end, error] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (error != std::errc() || end != text->data() + text->size()) {
      DPIPE_THROW(InvalidArgument, "{}='{}' is not a non-negative integer", name, *text);
    }
    return value;
  }

  /// The variable as a TCP port, if set.
  [[nodiscard]] std::optional<std::uint16_t> port(const char* name) const {
    const auto value = number(name);
    if (!value) return std::nullopt;
    if (*value == 0 || *value > 65535) DPIPE_THROW(InvalidArgument, "{}={} is not a TCP port (1-65535)", name, *value);
    return static_cast<std::uint16_t>(*value);
  }

 private:
  const std::map<std::string, std::string>& variables_;
};

/// The store's port when neither the options nor DPIPE_STORE_PORT choose it.
std::uint16_t default_store_port(const Environment& environment, Launcher launcher,
                                 std::optional<std::uint16_t> master_port) {
  if (master_port) return static_cast<std::uint16_t>(*master_port == 65535 ? 65534 : *master_port + 1);
  if (launcher == Launcher::kSlurm) {
    if (const auto job = environment.number("SLURM_JOB_ID")) return static_cast<std::uint16_t>(15000 + *job % 10000);
  }
  return kDefaultStorePort;
}

/// The first host of a Slurm node list, if the variable is set.
std::optional<std::string> first_slurm_host(const Environment& environment) {
  const std::string* nodes = environment.find("SLURM_JOB_NODELIST");
  if (nodes == nullptr) return std::nullopt;
  return expand_hostlist(*nodes).front();
}

/// The numbers of a bracket's body ("01-04,07"), as text padded to the width of each range's start.
std::vector<std::string> bracket_numbers(std::string_view expression, std::string_view body) {
  std::vector<std::string> numbers;
  std::size_t start = 0;
  while (start <= body.size()) {
    const std::size_t comma = std::min(body.find(',', start), body.size());
    const std::string_view part = body.substr(start, comma - start);
    const std::size_t dash = part.find('-');
    const std::string_view low = part.substr(0, dash);
    const std::string_view high = dash == std::string_view::npos ? low : part.substr(dash + 1);
    std::uint64_t from = 0;
    std::uint64_t to = 0;
    const auto parse = [](std::string_view text, std::uint64_t& value) {
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      return !text.empty() && error == std::errc() && end == text.data() + text.size();
    };
    if (!parse(low, from) || !parse(high, to)) {
      DPIPE_THROW(InvalidArgument, "expand_hostlist: '{}': '{}' is not a number or a range of numbers", expression,
                  part);
    }
    if (to < from) DPIPE_THROW(InvalidArgument, "expand_hostlist: '{}': the range '{}' descends", expression, part);
    for (std::uint64_t n = from; n <= to; ++n) numbers.push_back(fmt::format("{:0{}}", n, low.size()));
    start = comma + 1;
  }
  return numbers;
}

/// Appends `prefix` + each expansion of `item` (a host name with bracket groups) to `out`.
void append_expansions(std::string_view expression, std::string_view item, std::string prefix,
                       std::vector<std::string>& out) {
  const std::size_t open = item.find('[');
  const std::size_t stray = item.find(']');
  if (open == std::string_view::npos) {
    if (stray != std::string_view::npos)
      DPIPE_THROW(InvalidArgument, "expand_hostlist: '{}': ']' without '['", expression);
    out.push_back(prefix.append(item));
    return;
  }
  const std::size_t close = item.find(']', open);
  if (stray < open || close == std::string_view::npos || item.find('[', open + 1) < close) {
    DPIPE_THROW(InvalidArgument, "expand_hostlist: '{}': unbalanced '['", expression);
  }
  prefix.append(item.substr(0, open));
  for (const auto& number : bracket_numbers(expression, item.substr(open + 1, close - open - 1))) {
    append_expansions(expression, item.substr(close + 1), prefix + number, out);
  }
}

}  // namespace

std::string_view launcher_name(Launcher launcher) {
  switch (launcher) {
    case Launcher::kOptions:
      return "options";
    case Launcher::kTorchrun:
      return "torchrun";
    case Launcher::kSlurm:
      return "Slurm";
    case Launcher::kOpenMpi:
      return "Open MPI";
    case Launcher::kPmi:
      return "PMI";
    case Launcher::kNone:
      break;
  }
  return "none";
}

std::vector<std::string> expand_hostlist(std::string_view hostlist) {
  std::vector<std::string> hosts;
  std::size_t start = 0;
  std::size_t depth = 0;
  for (std::size_t i = 0; i <= hostlist.size(); ++i) {
    if (i < hostlist.size() && hostlist[i] == '[') ++depth;
    if (i < hostlist.size() && hostlist[i] == ']' && depth > 0) --depth;
    if (i < hostlist.size() && (hostlist[i] != ',' || depth > 0)) continue;
    const std::string_view item = hostlist.substr(start, i - start);
    if (item.empty()) DPIPE_THROW(InvalidArgument, "expand_hostlist: '{}' has an empty host name", hostlist);
    append_expansions(hostlist, item, {}, hosts);
    start = i + 1;
  }
  return hosts;
}

LaunchEnvironment detect_launch_environment(const std::map<std::string, std::string>& variables,
                                            const RendezvousOptions& options) {
  const Environment environment(variables);
  const LauncherVariables* found = nullptr;
  for (const auto& candidate : kLaunchers) {
    if (environment.find(candidate.rank) != nullptr) {
      found = &candidate;
      break;
    }
  }
  LaunchEnvironment result;
  std::vector<std::string> missing;
  if (found != nullptr) {
    result.launcher = found->launcher;
    result.rank = *environment.number(found->rank);
    if (const auto size = environment.number(found->world_size)) {
      result.world_size = *size;
    } else if (!options.world_size) {
      missing.emplace_back(found->world_size);
    }
    if (const auto local = environment.number(found->local_rank)) result.local_rank = static_cast<std::size_t>(*local);
    if (const std::string* job = environment.find(found->job_id)) result.job_id = *job;
  } else if (!options.rank) {
    // A launcher's world size or local rank without its rank (a variable lost on the way): each
    // process would run alone on the whole data set. Slurm is no such case: a program run from the
    // batch script itself sees the allocation's SLURM_NTASKS and is one process.
    for (const auto& candidate : kLaunchers) {
      if (candidate.launcher == Launcher::kSlurm) continue;
      if (environment.find(candidate.world_size) == nullptr && environment.find(candidate.local_rank) == nullptr) {
        continue;
      }
      result.launcher = candidate.launcher;
      if (const auto size = environment.number(candidate.world_size)) result.world_size = *size;
      missing.emplace_back(candidate.rank);
      break;
    }
  }
  if (options.rank) result.rank = *options.rank;
  if (options.world_size) result.world_size = *options.world_size;
  if (options.local_rank) result.local_rank = options.local_rank;
  if (options.rank && options.world_size) result.launcher = Launcher::kOptions;
  if (options.rank && !options.world_size && found == nullptr) missing.emplace_back("WORLD_SIZE");
  if (result.world_size == 0) {
    DPIPE_THROW(InvalidArgument, "the world size ({}) is 0", found != nullptr ? found->world_size : "options");
  }

  const auto master_port = environment.port("MASTER_PORT");
  if (result.world_size > 1 || options.store_host) {
    if (options.store_host) {
      result.store_host = *options.store_host;
    } else if (const std::string* master = environment.find("MASTER_ADDR")) {
      result.store_host = *master;
    } else if (const auto slurm_host =
                   result.launcher == Launcher::kSlurm ? first_slurm_host(environment) : std::nullopt) {
      result.store_host = *slurm_host;
    } else if (result.launcher == Launcher::kOpenMpi &&
               environment.number("OMPI_COMM_WORLD_LOCAL_SIZE") == result.world_size) {
      result.store_host = "127.0.0.1";  // every rank runs on this node
    } else {
      missing.emplace_back("MASTER_ADDR");
      if (result.launcher == Launcher::kSlurm) missing.emplace_back("SLURM_JOB_NODELIST");
    }
  }
  if (!missing.empty()) {
    DPIPE_THROW(RendezvousError,
                "the {} environment is incomplete: {} {} not set; set {} or pass the values in the options",
                launcher_name(result.launcher), fmt::join(missing, ", "), missing.size() == 1 ? "is" : "are",
                missing.size() == 1 ? "it" : "them");
  }
  if (result.rank >= result.world_size) {
    DPIPE_THROW(InvalidArgument, "rank {} is outside a world of {} ranks ({})", result.rank, result.world_size,
                launcher_name(result.launcher));
  }

  const auto chosen_port = options.store_port ? options.store_port : environment.port("DPIPE_STORE_PORT");
  if (chosen_port && chosen_port == master_port) {
    DPIPE_THROW(InvalidArgument,
                "the store's port {} is the launcher's MASTER_PORT, where its own store listens: choose another "
                "(DPIPE_STORE_PORT or RendezvousOptions::store_port)",
                *chosen_port);
  }
  result.store_port = chosen_port ? *chosen_port : default_store_port(environment, result.launcher, master_port);
  if (options.token) {
    result.token = *options.token;
  } else if (const std::string* token = environment.find("DPIPE_STORE_TOKEN")) {
    result.token = *token;
  } else if (!result.job_id.empty()) {
    result.token = fmt::format("{}:{}", launcher_name(result.launcher), result.job_id);
  } else {
    result.token = "dpipe";
  }
  return result;
}

LaunchEnvironment detect_launch_environment(const RendezvousOptions& options) {
  std::map<std::string, std::string> variables;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view text(*entry);
    const std::size_t equals = text.find('=');
    if (equals != std::string_view::npos) variables.emplace(text.substr(0, equals), text.substr(equals + 1));
  }
  return detect_launch_environment(variables, options);
}

}  // namespace dpipe
