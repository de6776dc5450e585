// Where this process stands in a distributed job: its rank, the world size and the rendezvous
// store's address, read from whichever launcher started it (torchrun, srun, mpirun) or from the
// options. Try `RANK=1 WORLD_SIZE=2 MASTER_ADDR=node7 MASTER_PORT=29500 ./dpipe_example_launch_environment`.

#include <cstdio>
#include <string>

#include <dpipe/dpipe.hpp>

int main() {
  try {
    // [detect]
    const dpipe::LaunchEnvironment env = dpipe::detect_launch_environment();
    std::printf("rank %zu of %zu (%s)", env.rank, env.world_size,
                std::string(dpipe::launcher_name(env.launcher)).c_str());
    if (env.world_size > 1) std::printf(", store at %s:%u", env.store_host.c_str(), unsigned{env.store_port});
    std::printf("\n");
    // [detect]
  } catch (const dpipe::RendezvousError& error) {
    std::printf("cannot join the job: %s\n", error.what());  // names the missing variables
    return 1;
  }
  return 0;
}
