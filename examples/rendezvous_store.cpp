// The rendezvous store the ranks of a distributed job share: rank 0 serves a TcpStore, every rank
// connects with the job's token, and each loader keeps its keys under a prefix. Here a thread
// plays rank 1; in a job it is another process, usually on another machine.

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

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
}
