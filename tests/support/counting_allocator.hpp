#pragma once
// A HostAllocator that counts its blocks, in front of plain aligned operator new (no recycling),
// so that a test sees every allocation a tensor path makes and every buffer it gives back.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <new>
#include <string>

#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe::testing {

class CountingAllocator final : public HostAllocator {
 public:
  void* allocate(std::size_t bytes) override {
    allocations.fetch_add(1);
    live.fetch_add(1);
    return ::operator new (bytes, std::align_val_t{kTensorAlignment});
  }
  void deallocate(void* data, std::size_t bytes) noexcept override {
    live.fetch_sub(1);
    ::operator delete (data, bytes, std::align_val_t{kTensorAlignment});
  }
  [[nodiscard]] std::string name() const override { return "counting"; }

  std::atomic<std::int64_t> allocations{0};
  std::atomic<std::int64_t> live{0};
};

}  // namespace dpipe::testing
