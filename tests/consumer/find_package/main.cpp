// A program that uses dpipe as any consumer would.
#include <cstdio>
#include <vector>

#include <dpipe/dpipe.hpp>

int main() {
  std::printf("consumer ok:");
  for (int x : dpipe::iter::from(std::vector<int>{0, 1, 2, 3}).map([](int v) { return 2 * v; })) std::printf(" %d", x);
  std::printf("\n");
}
