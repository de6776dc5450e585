// Reading rank, world size and the store's address from each launcher's environment.

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

namespace {

using dpipe::detect_launch_environment;
using dpipe::expand_hostlist;
using dpipe::Launcher;
using Variables = std::map<std::string, std::string>;
using Hosts = std::vector<std::string>;

TEST_CASE("launch environment: torchrun", "[distributed][launch]") {
  const auto env = detect_launch_environment(Variables{{"RANK", "1"},
                                                       {"WORLD_SIZE", "2"},
                                                       {"LOCAL_RANK", "1"},
                                                       {"MASTER_ADDR", "node7"},
                                                       {"MASTER_PORT", "29500"},
                                                       {"TORCHELASTIC_RUN_ID", "job-42"},
                                                       {"SLURM_PROCID", "0"}});  // torchrun inside Slurm
  CHECK(env.launcher == Launcher::kTorchrun);
  CHECK(env.rank == 1);
  CHECK(env.world_size == 2);
  CHECK(env.local_rank == 1);
  CHECK(env.store_host == "node7");
  CHECK(env.store_port == 29501);  // next to the launcher's own store, never on it
  CHECK(env.job_id == "job-42");
  CHECK(env.token == "torchrun:job-42");  // every rank of the job derives the same token
}

TEST_CASE("launch environment: Slurm / the first host of the node list", "[distributed][launch]") {
  const auto env = detect_launch_environment(Variables{{"SLURM_PROCID", "3"},
                                                       {"SLURM_NTASKS", "4"},
                                                       {"SLURM_LOCALID", "1"},
                                                       {"SLURM_JOB_ID", "123456"},
                                                       {"SLURM_JOB_NODELIST", "gpu[07-08,11]"}});
  CHECK(env.launcher == Launcher::kSlurm);
  CHECK(env.rank == 3);
  CHECK(env.world_size == 4);
  CHECK(env.local_rank == 1);
  CHECK(env.store_host == "gpu07");
  CHECK(env.store_port == 18456);  // 15000 + the job id's last four digits
  CHECK(env.job_id == "123456");
  CHECK(env.token == "Slurm:123456");
  const auto with_master = detect_launch_environment(
      Variables{{"SLURM_PROCID", "0"}, {"SLURM_NTASKS", "2"}, {"SLURM_JOB_NODELIST", "a,b"}, {"MASTER_ADDR", "b"}});
  CHECK(with_master.store_host == "b");
}

TEST_CASE("launch environment: Open MPI / PMI / nothing at all", "[distributed][launch]") {
  const auto mpi = detect_launch_environment(Variables{{"OMPI_COMM_WORLD_RANK", "1"},
                                                       {"OMPI_COMM_WORLD_SIZE", "2"},
                                                       {"OMPI_COMM_WORLD_LOCAL_RANK", "1"},
                                                       {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"},
                                                       {"SLURM_PROCID", "0"},  // mpirun inside a Slurm allocation
                                                       {"SLURM_NTASKS", "2"}});
  CHECK(mpi.launcher == Launcher::kOpenMpi);
  CHECK(mpi.rank == 1);
  CHECK(mpi.world_size == 2);
  CHECK(mpi.local_rank == 1);
  CHECK(mpi.store_host == "127.0.0.1");  // every rank on this node
  CHECK(mpi.store_port == dpipe::kDefaultStorePort);
  CHECK(mpi.token == "dpipe");  // no job id: set DPIPE_STORE_TOKEN to tell jobs apart

  const auto pmi =
      detect_launch_environment(Variables{{"PMI_RANK", "0"}, {"PMI_SIZE", "2"}, {"MASTER_ADDR", "10.0.0.1"}});
  CHECK(pmi.launcher == Launcher::kPmi);
  CHECK(pmi.world_size == 2);
  CHECK(pmi.store_host == "10.0.0.1");
  CHECK(pmi.local_rank == std::nullopt);

  const auto alone = detect_launch_environment(Variables{});
  CHECK(alone.launcher == Launcher::kNone);
  CHECK(alone.rank == 0);
  CHECK(alone.world_size == 1);
  CHECK(alone.store_host.empty());  // a world of one meets nobody
  CHECK(dpipe::launcher_name(alone.launcher) == "none");
}

TEST_CASE("launch environment: the options and DPIPE_STORE_PORT override the launcher", "[distributed][launch]") {
  const Variables torchrun{{"RANK", "0"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}, {"MASTER_PORT", "29500"}};
  dpipe::RendezvousOptions options;
  options.rank = 1;
  options.world_size = 3;
  options.store_host = "b";
  options.store_port = 4000;
  const auto chosen = detect_launch_environment(torchrun, options);
  CHECK(chosen.launcher == Launcher::kOptions);
  CHECK(chosen.rank == 1);
  CHECK(chosen.world_size == 3);
  CHECK(chosen.store_host == "b");
  CHECK(chosen.store_port == 4000);

  auto with_port = torchrun;
  with_port["DPIPE_STORE_PORT"] = "31000";
  with_port["DPIPE_STORE_TOKEN"] = "secret";
  CHECK(detect_launch_environment(with_port).store_port == 31000);
  CHECK(detect_launch_environment(with_port).token == "secret");
  options.token = "chosen";
  CHECK(detect_launch_environment(with_port, options).token == "chosen");
  with_port["DPIPE_STORE_PORT"] = "29500";
  CHECK_THROWS_MATCHES(detect_launch_environment(with_port), dpipe::InvalidArgument,
                       Catch::Message("the store's port 29500 is the launcher's MASTER_PORT, where its own store "
                                      "listens: choose another (DPIPE_STORE_PORT or RendezvousOptions::store_port)"));
  with_port["DPIPE_STORE_PORT"] = "70000";
  CHECK_THROWS_MATCHES(detect_launch_environment(with_port), dpipe::InvalidArgument,
                       Catch::Message("DPIPE_STORE_PORT=70000 is not a TCP port (1-65535)"));
}

TEST_CASE("launch environment: an incomplete or wrong environment names the variables", "[distributed][launch]") {
  CHECK_THROWS_MATCHES(
      detect_launch_environment(Variables{{"RANK", "0"}}), dpipe::RendezvousError,
      Catch::Message("the torchrun environment is incomplete: WORLD_SIZE is not set; set it or pass the values in "
                     "the options"));
  CHECK_THROWS_MATCHES(detect_launch_environment(Variables{{"SLURM_PROCID", "1"}, {"SLURM_NTASKS", "2"}}),
                       dpipe::RendezvousError,
                       Catch::Message("the Slurm environment is incomplete: MASTER_ADDR, SLURM_JOB_NODELIST are not "
                                      "set; set them or pass the values in the options"));
  // A world size or a local rank without the rank would run every process alone on the whole data set.
  CHECK_THROWS_MATCHES(
      detect_launch_environment(Variables{{"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}), dpipe::RendezvousError,
      Catch::Message("the torchrun environment is incomplete: RANK is not set; set it or pass the values in the "
                     "options"));
  CHECK_THROWS_MATCHES(detect_launch_environment(Variables{{"WORLD_SIZE", "2"}}), dpipe::RendezvousError,
                       Catch::Message("the torchrun environment is incomplete: RANK, MASTER_ADDR are not set; set "
                                      "them or pass the values in the options"));
  CHECK_THROWS_MATCHES(detect_launch_environment(Variables{{"LOCAL_RANK", "0"}}), dpipe::RendezvousError,
                       Catch::Message("the torchrun environment is incomplete: RANK is not set; set it or pass the "
                                      "values in the options"));
  CHECK_THROWS_MATCHES(
      detect_launch_environment(Variables{{"OMPI_COMM_WORLD_SIZE", "2"}, {"OMPI_COMM_WORLD_LOCAL_SIZE", "2"}}),
      dpipe::RendezvousError,
      Catch::Message("the Open MPI environment is incomplete: OMPI_COMM_WORLD_RANK is not set; set it or pass the "
                     "values in the options"));
  CHECK_THROWS_MATCHES(detect_launch_environment(Variables{{"PMI_SIZE", "4"}, {"MASTER_ADDR", "a"}}),
                       dpipe::RendezvousError,
                       Catch::Message("the PMI environment is incomplete: PMI_RANK is not set; set it or pass the "
                                      "values in the options"));
  // A Slurm allocation's SLURM_NTASKS alone is one process (a program run from the batch script).
  CHECK(detect_launch_environment(Variables{{"SLURM_NTASKS", "4"}}).world_size == 1);
  CHECK_THROWS_MATCHES(detect_launch_environment(Variables{{"RANK", "x"}}), dpipe::InvalidArgument,
                       Catch::Message("RANK='x' is not a non-negative integer"));
  CHECK_THROWS_MATCHES(detect_launch_environment(Variables{{"RANK", "2"}, {"WORLD_SIZE", "2"}, {"MASTER_ADDR", "a"}}),
                       dpipe::InvalidArgument, Catch::Message("rank 2 is outside a world of 2 ranks (torchrun)"));
  CHECK_THROWS_MATCHES(detect_launch_environment(Variables{{"PMI_RANK", "0"}, {"PMI_SIZE", "0"}}),
                       dpipe::InvalidArgument, Catch::Message("the world size (PMI_SIZE) is 0"));
}

TEST_CASE("launch environment: read from the process's own environment", "[distributed][launch]") {
  ::setenv("WORLD_SIZE", "2", 1);
  ::setenv("RANK", "1", 1);
  ::setenv("MASTER_ADDR", "127.0.0.1", 1);
  const auto env = detect_launch_environment();
  ::unsetenv("WORLD_SIZE");
  ::unsetenv("RANK");
  ::unsetenv("MASTER_ADDR");
  CHECK(env.launcher == Launcher::kTorchrun);
  CHECK(env.rank == 1);
  CHECK(env.store_host == "127.0.0.1");
}

TEST_CASE("expand_hostlist: Slurm's hostlist expressions", "[distributed][launch]") {
  CHECK(expand_hostlist("gpu[01-04,07]") == Hosts{"gpu01", "gpu02", "gpu03", "gpu04", "gpu07"});
  CHECK(expand_hostlist("node1") == Hosts{"node1"});
  CHECK(expand_hostlist("a,b[9-10],c") == Hosts{"a", "b9", "b10", "c"});
  CHECK(expand_hostlist("rack[1-2]-n[08-09]") == Hosts{"rack1-n08", "rack1-n09", "rack2-n08", "rack2-n09"});
  CHECK_THROWS_MATCHES(expand_hostlist("gpu[01-"), dpipe::InvalidArgument,
                       Catch::Message("expand_hostlist: 'gpu[01-': unbalanced '['"));
  CHECK_THROWS_MATCHES(expand_hostlist("gpu]"), dpipe::InvalidArgument,
                       Catch::Message("expand_hostlist: 'gpu]': ']' without '['"));
  CHECK_THROWS_MATCHES(expand_hostlist("a,,b"), dpipe::InvalidArgument,
                       Catch::Message("expand_hostlist: 'a,,b' has an empty host name"));
  CHECK_THROWS_MATCHES(expand_hostlist("n[3-1]"), dpipe::InvalidArgument,
                       Catch::Message("expand_hostlist: 'n[3-1]': the range '3-1' descends"));
  CHECK_THROWS_MATCHES(expand_hostlist("n[a-b]"), dpipe::InvalidArgument,
                       Catch::Message("expand_hostlist: 'n[a-b]': 'a-b' is not a number or a range of numbers"));
}

}  // namespace
