#pragma once
// What B4 and B10 share: 1 MiB buffers made by the workers, and the byte rate at which a loader
// hands them out, checked element by element.

#include <cstdint>
#include <cstring>
#include <span>
#include <vector>

#include <dpipe/dpipe.hpp>

#include "harness.hpp"

namespace dpipe::bench {

constexpr std::size_t kBufferBytes = std::size_t{1} << 20;

/// A buffer of 1 MiB filled with the low byte of `id`: what the workers make.
inline std::vector<std::uint8_t> make_buffer(std::uint32_t id) {
  std::vector<std::uint8_t> buffer(kBufferBytes);
  std::memset(buffer.data(), static_cast<int>(id & 0xFF), buffer.size());
  return buffer;
}

/// The same buffer as a dpipe::Tensor (uint8 [1 MiB]), from the worker's current allocator.
inline Tensor make_tensor_buffer(std::uint32_t id) {
  Tensor buffer(DType::kUInt8, {static_cast<std::int64_t>(kBufferBytes)});
  std::memset(buffer.data(), static_cast<int>(id & 0xFF), kBufferBytes);
  return buffer;
}

/// The bytes of an element made by make_buffer or make_tensor_buffer.
inline std::span<const std::uint8_t> bytes_of(const std::vector<std::uint8_t>& buffer) { return buffer; }
inline std::span<const std::uint8_t> bytes_of(const Tensor& buffer) { return buffer.values<std::uint8_t>(); }

/// Reads an epoch of `loader`, whose elements are `count` buffers in id order; clears `ok` on
/// wrong output. Returns the buffers read.
template <class T>
std::uint64_t read_buffers(DataLoader2<T>& loader, std::size_t count, bool& ok) {
  std::uint64_t seen = 0;
  std::uint32_t expected_id = 0;
  for (const auto& element : loader) {
    const auto bytes = bytes_of(element);
    ok = ok && bytes.size() == kBufferBytes && bytes.front() == static_cast<std::uint8_t>(expected_id & 0xFF) &&
         bytes.back() == bytes.front();
    ++expected_id;
    ++seen;
  }
  ok = ok && seen == count;
  return seen;
}

/// Bytes/s of an epoch of read_buffers(), best of `repeats`.
template <class T>
double buffer_rate(DataLoader2<T>& loader, std::size_t count, int repeats, bool& ok) {
  std::uint64_t elements = 0;
  const double seconds = best_seconds(
      repeats, [&] { return read_buffers(loader, count, ok); }, elements);
  return static_cast<double>(elements * kBufferBytes) / seconds;
}

}  // namespace dpipe::bench
