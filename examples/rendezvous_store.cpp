// The rendezvous store the ranks of a distributed job share: rank 0 serves a TcpStore, every rank
// connects with the job's token, and each loader keeps its keys under a prefix. Then a store the
// trainer already has, handed to DistributedReadingService. Here threads play the ranks; in a job
// each is another process, usually on another machine.

#include <cstdio>
#include <memory>
#include <numeric>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <dpipe/dpipe.hpp>

int main() {
  // [store]
  dpipe::TcpStoreOptions options;
  options.serve = true;      // rank 0 serves the store (port 0: any free port)...
  options.token = "my-job";  // ...to whoever presents the job's token
  auto store = std::make_shared<dpipe::TcpStore>(options);
  dpipe::PrefixStore loader_keys(store, "loader0/");  // each loader's keys under its own prefix

  std::thread rank1([port = store->port()] {
    dpipe::TcpStoreOptions client;
    client.host = "127.0.0.1";
    client.port = port;
    client.token = "my-job";
    dpipe::TcpStore rank1_store(client);  // retries until rank 0 serves, up to the timeout
    rank1_store.set("loader0/seed", std::string_view("1234"));
    rank1_store.add("loader0/arrived", 1);
  });
  const std::string seed = loader_keys.get_text("seed");  // waits until rank 1 has set it
  rank1.join();
  // [store]
  std::printf("seed from rank 1: %s, ranks arrived: %lld\n", seed.c_str(),
              static_cast<long long>(loader_keys.add("arrived", 0)));

  std::vector<int> ids(10);
  std::iota(ids.begin(), ids.end(), 0);
  const auto rank_loader = [&](std::size_t rank, std::shared_ptr<dpipe::Store> my_store) {
    // [own_store]
    dpipe::DistributedOptions distributed;
    distributed.store = my_store;        // the trainer's own store: no TcpStore is started for the loader
    distributed.name = "train";          // its keys go under "dpipe/train/0/"
    distributed.rendezvous.rank = rank;  // from the trainer's framework, or left to the launcher
    distributed.rendezvous.world_size = 2;
    dpipe::DataLoader2<int> loader(dpipe::iter::from(ids).shuffle().sharding_filter(),
                                   dpipe::DistributedReadingService(distributed));
    // [own_store]
    int sum = 0;
    for (const int id : loader) sum += id;
    return sum;
  };
  int rank1_sum = 0;
  std::thread rank1_loader([&, port = store->port()] {
    dpipe::TcpStoreOptions client;  // rank 1's own connection: a TcpStore is used by one thread at a time
    client.port = port;
    client.token = "my-job";
    rank1_sum = rank_loader(1, std::make_shared<dpipe::TcpStore>(client));
  });
  const int rank0_sum = rank_loader(0, store);
  rank1_loader.join();
  std::printf("with the trainer's store: rank 0 and rank 1 read %d samples in all\n", rank0_sum + rank1_sum);
}
