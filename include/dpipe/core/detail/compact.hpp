#pragma once
/// \file
/// compact(): the in-place selection step of filtering nodes' bulk paths.

#include <cstddef>
#include <type_traits>
#include <vector>

namespace dpipe::detail {

/// Keeps, in order, the elements of out[start, end) for which `keep` returns true (called once per
/// element, in order) and erases the others; returns how many were kept. If `keep` throws, the
/// elements kept before it stay and the rest are erased.
template <class T, class Keep>
std::size_t compact(std::vector<T>& out, std::size_t start, Keep&& keep) {
  T* const data = out.data();
  const std::size_t end = out.size();
  std::size_t write = start;
  try {
    if constexpr (std::is_trivially_copyable_v<T> && sizeof(T) <= 16) {
      // Branch-free: always copy, advance only past kept elements. Four elements are loaded before
      // any of them is stored, so that the loads need not wait for the stores' addresses.
      std::size_t read = start;
      for (; read + 4 <= end; read += 4) {
        const T group[4] = {data[read], data[read + 1], data[read + 2], data[read + 3]};
        for (const T& element : group) {
          data[write] = element;
          write += keep(element) ? std::size_t{1} : std::size_t{0};
        }
      }
      for (; read < end; ++read) {
        const T element = data[read];
        data[write] = element;
        write += keep(element) ? std::size_t{1} : std::size_t{0};
      }
    } else {
      for (std::size_t read = start; read < end; ++read) {
        if (!keep(static_cast<const T&>(data[read]))) continue;
        if (write != read) data[write] = std::move(data[read]);
        ++write;
      }
    }
  } catch (...) {
    out.erase(out.begin() + static_cast<std::ptrdiff_t>(write), out.end());
    throw;
  }
  out.erase(out.begin() + static_cast<std::ptrdiff_t>(write), out.end());
  return write - start;
}

}  // namespace dpipe::detail
