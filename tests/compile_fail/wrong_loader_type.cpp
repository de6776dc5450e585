// Must not compile: the pipeline yields std::string and the loader is declared for int. The test
// expects the compiler to say so, naming both types.

#include <string>
#include <vector>

#include <dpipe/dpipe.hpp>

int main() {
  auto names = dpipe::iter::from(std::vector<int>{1, 2}).map([](int x) { return std::to_string(x); });
  dpipe::DataLoader2<int> loader(names);
  return static_cast<int>(loader.epoch());
}
