// A stand-in for the CUDA runtime's pinned-memory calls, for the tests on machines without a GPU:
// cudaHostAlloc gives page-aligned heap memory and counts it, or, built with FAKE_CUDART_NO_DEVICE,
// fails as the real runtime does on a machine without a device.

#include <atomic>
#include <cstdint>
#include <cstdlib>

namespace {
std::atomic<std::int64_t> live_blocks{0};  // called from worker threads at once
}  // namespace

extern "C" {

int cudaHostAlloc(void** data, std::size_t bytes, unsigned /*flags*/) {
#ifdef FAKE_CUDART_NO_DEVICE
  (void)data;
  (void)bytes;
  return 100;
#else
  *data = std::aligned_alloc(4096, (bytes + 4095) / 4096 * 4096);
  if (*data == nullptr) return 2;
  live_blocks.fetch_add(1);
  return 0;
#endif
}

int cudaFreeHost(void* data) {
  std::free(data);
  live_blocks.fetch_sub(1);
  return 0;
}

const char* cudaGetErrorString(int error) {
  return error == 100 ? "no CUDA-capable device is detected" : "out of memory";
}

std::int64_t fake_cudart_live_blocks() { return live_blocks.load(); }

}  // extern "C"
