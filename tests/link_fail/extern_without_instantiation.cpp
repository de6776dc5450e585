// Must not link: the element type is declared compiled elsewhere (DPIPE_EXTERN_ELEMENT_TYPE) and
// no translation unit instantiates it. The linker names the missing machinery of the type.

#include <vector>

#include <dpipe/dpipe.hpp>

namespace dpipe_test {
struct Unlinked {
  int value = 0;
};
}  // namespace dpipe_test

DPIPE_EXTERN_ELEMENT_TYPE(dpipe_test::Unlinked);

int main() {
  auto pipe = dpipe::iter::from(std::vector<int>{1, 2}).map([](int value) { return dpipe_test::Unlinked{value}; });
  return pipe.ptr() == nullptr ? 1 : 0;
}
