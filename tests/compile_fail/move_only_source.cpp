// Must not compile: iter::from re-reads its range every epoch, so it would copy the elements of a
// vector of std::unique_ptr. The test expects the compiler to name dpipe::iter::from_range.

#include <memory>
#include <vector>

#include <dpipe/dpipe.hpp>

int main() {
  std::vector<std::unique_ptr<int>> boxes;
  auto pipe = dpipe::iter::from(std::move(boxes));
  return pipe.length() ? 0 : 1;
}
