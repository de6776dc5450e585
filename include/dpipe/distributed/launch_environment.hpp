#pragma once
/// \file
/// A process's place in a distributed job, read from the options or from its launcher's
/// environment (torchrun, Slurm's srun, Open MPI's mpirun, PMI), and where the job's ranks meet:
/// the host and port of the rendezvous store that rank 0 serves. The distributed reading service
/// starts from it. Thread-safety: the functions read the environment given, or the process's
/// (std::getenv) and are safe to call from any thread that does not change it meanwhile.

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace dpipe {

/// Who started the process, as far as its environment tells.
enum class Launcher {
  kOptions,  // the options gave the rank and the world size
  kTorchrun,
  kSlurm,
  kOpenMpi,
  kPmi,
  kNone,  // nothing: a single process, rank 0 of 1
};

/// "torchrun", "Slurm", "Open MPI", "PMI", "options" or "none".
[[nodiscard]] std::string_view launcher_name(Launcher launcher);

/// What the options may set instead of the environment (each overrides its variables).
struct RendezvousOptions {
  std::optional<std::size_t> rank;
  std::optional<std::size_t> world_size;
  std::optional<std::size_t> local_rank;
  /// The host of rank 0, where the store is served.
  std::optional<std::string> store_host;
  /// The store's port (else DPIPE_STORE_PORT, else a default that never is the launcher's own
  /// MASTER_PORT: see detect_launch_environment).
  std::optional<std::uint16_t> store_port;
  /// The job token the store's connections must present (else DPIPE_STORE_TOKEN, else derived
  /// from the launcher's job id).
  std::optional<std::string> token;
};

/// A process's place in its job.
struct LaunchEnvironment {
  Launcher launcher = Launcher::kNone;
  std::size_t rank = 0;
  std::size_t world_size = 1;
  std::optional<std::size_t> local_rank;
  /// Where rank 0 serves the store; empty for a world of one, which opens no socket.
  std::string store_host;
  std::uint16_t store_port = 0;
  /// The launcher's id of the job (TORCHELASTIC_RUN_ID, SLURM_JOB_ID), empty when it has none.
  std::string job_id;
  /// The token every rank presents to the store: the options', else DPIPE_STORE_TOKEN, else
  /// "<launcher>:<job id>" ("torchrun:job-42"), else "dpipe". Every rank of a job derives the
  /// same one; a stray process of another job does not.
  std::string token;
};

/// The store's port when nothing chooses it: MASTER_PORT + 1 when the launcher set MASTER_PORT
/// (so that jobs sharing a node differ), 15000 + the last four digits of SLURM_JOB_ID under
/// Slurm, else this.
inline constexpr std::uint16_t kDefaultStorePort = 29511;

/// Reads `environment` (variable name -> value) and `options`:
///
/// - rank and world size from the options, else the first launcher whose rank variable is set:
///   torchrun (RANK, WORLD_SIZE, LOCAL_RANK, TORCHELASTIC_RUN_ID), Open MPI
///   (OMPI_COMM_WORLD_RANK, OMPI_COMM_WORLD_SIZE, OMPI_COMM_WORLD_LOCAL_RANK), PMI (PMI_RANK,
///   PMI_SIZE), Slurm (SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID); none: rank 0 of 1;
/// - the store's host from the options, else MASTER_ADDR, else (Slurm) the first host of
///   SLURM_JOB_NODELIST, else (Open MPI, every rank on this node) 127.0.0.1;
/// - its port from the options, else DPIPE_STORE_PORT, else the default (kDefaultStorePort);
/// - the job token as LaunchEnvironment::token says.
///
/// Throws RendezvousError naming every missing variable when the environment is incomplete (a
/// rank without a world size, no host for a world larger than one), and InvalidArgument naming
/// the variable for a value that is not a number, a rank outside the world, or a bad port.
[[nodiscard]] LaunchEnvironment detect_launch_environment(const std::map<std::string, std::string>& environment,
                                                          const RendezvousOptions& options = {});

/// detect_launch_environment() over this process's environment.
[[nodiscard]] LaunchEnvironment detect_launch_environment(const RendezvousOptions& options = {});

/// The hosts of a Slurm hostlist expression, in order: "gpu[01-04,07],login1" is gpu01, gpu02,
/// gpu03, gpu04, gpu07, login1 (zero padding kept; several bracket groups in one name combine).
/// Throws InvalidArgument naming the expression for an unbalanced bracket, an empty item or a
/// descending range.
[[nodiscard]] std::vector<std::string> expand_hostlist(std::string_view hostlist);

}  // namespace dpipe
