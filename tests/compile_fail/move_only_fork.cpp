// Must not compile: fork hands every branch a copy of each element, and std::unique_ptr has none.
// The test expects the compiler to name dpipe::copyable_element.

#include <memory>
#include <vector>

#include <dpipe/dpipe.hpp>

int main() {
  auto boxes = dpipe::iter::from(std::vector<int>{1, 2}).map([](int x) { return std::make_unique<int>(x); });
  auto branches = boxes.fork(2);
  return static_cast<int>(branches.size());
}
