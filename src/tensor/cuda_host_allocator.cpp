// Pinned host memory from the CUDA runtime, loaded with dlopen: dpipe has no build dependency on
// CUDA, and a machine without it gets a clear NotSupportedError.

#include <cstdlib>
#include <dlfcn.h>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include <dpipe/core/error.hpp>
#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe {

namespace {

constexpr std::size_t kPinnedCachedBytes = std::size_t{512} << 20;
constexpr unsigned kHostAllocDefault = 0;  // cudaHostAllocDefault

/// The three functions dpipe calls. The CUDA runtime's cudaError_t is an int-sized enum.
struct CudaRuntime {
  std::string path;
  int (*host_alloc)(void**, std::size_t, unsigned) = nullptr;
  int (*free_host)(void*) = nullptr;
  const char* (*error_string)(int) = nullptr;

  [[nodiscard]] std::string describe(int error) const {
    return fmt::format("{} (CUDA error {})", error_string(error), error);
  }
};

template <class Function>
Function symbol(void* handle, const std::string& path, const char* name) {
  dlerror();
  void* address = dlsym(handle, name);
  if (address == nullptr) {
    const char* why = dlerror();
    DPIPE_THROW(NotSupportedError, "pinned memory: the CUDA runtime {} has no {} ({})", path, name,
                why != nullptr ? why : "null symbol");
  }
  return reinterpret_cast<Function>(address);
}

/// Loads the first of `candidates` that dlopen finds. The handle is never closed: the CUDA runtime
/// does not support being unloaded, and pinned blocks may outlive everything else.
CudaRuntime load_runtime(const std::vector<std::string>& candidates) {
  std::string failures;
  for (const auto& candidate : candidates) {
    void* handle = dlopen(candidate.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
      const char* why = dlerror();
      failures += fmt::format("{}{}", failures.empty() ? "" : "; ", why != nullptr ? why : candidate);
      continue;
    }
    CudaRuntime runtime;
    runtime.path = candidate;
    runtime.host_alloc = symbol<decltype(runtime.host_alloc)>(handle, candidate, "cudaHostAlloc");
    runtime.free_host = symbol<decltype(runtime.free_host)>(handle, candidate, "cudaFreeHost");
    runtime.error_string = symbol<decltype(runtime.error_string)>(handle, candidate, "cudaGetErrorString");
    return runtime;
  }
  DPIPE_THROW(NotSupportedError,
              "pinned memory needs the CUDA runtime, and none loaded: {} (set DPIPE_CUDA_RUNTIME to its path, or "
              "pin_memory = false)",
              failures);
}

class CudaHostAllocator final : public HostAllocator {
 public:
  explicit CudaHostAllocator(CudaRuntime runtime) : runtime_(std::move(runtime)) {}

  void* allocate(std::size_t bytes) override {
    void* data = nullptr;
    if (const int error = runtime_.host_alloc(&data, bytes, kHostAllocDefault); error != 0 || data == nullptr) {
      DPIPE_THROW(NotSupportedError, "pinned memory: cudaHostAlloc of {} bytes failed in {}: {}", bytes, runtime_.path,
                  runtime_.describe(error));
    }
    return data;
  }
  void deallocate(void* data, std::size_t /*bytes*/) noexcept override { runtime_.free_host(data); }
  [[nodiscard]] bool pinned() const noexcept override { return true; }
  [[nodiscard]] std::string name() const override { return "cuda-host"; }

 private:
  CudaRuntime runtime_;
};

HostAllocatorPtr make_pinned(const std::vector<std::string>& candidates) {
  auto pinned = std::make_shared<CudaHostAllocator>(load_runtime(candidates));
  // Pins one page and frees it: a runtime without a driver or a device fails here, not mid-epoch.
  pinned->deallocate(pinned->allocate(4096), 4096);
  return recycling_allocator(std::move(pinned), kPinnedCachedBytes);
}

}  // namespace

HostAllocatorPtr cuda_host_allocator(const std::string& library) {
  if (!library.empty()) return make_pinned({library});
  static std::mutex mutex;
  static HostAllocatorPtr* shared = nullptr;  // never destroyed: its blocks may outlive static destruction
  const std::lock_guard lock(mutex);
  if (shared == nullptr) {
    std::vector<std::string> candidates;
    if (const char* configured = std::getenv("DPIPE_CUDA_RUNTIME"); configured != nullptr && *configured != '\0') {
      candidates.emplace_back(configured);
    } else {
      candidates = {"libcudart.so", "libcudart.so.13", "libcudart.so.12", "libcudart.so.11.0"};
    }
    shared = new HostAllocatorPtr(make_pinned(candidates));
  }
  return *shared;
}

}  // namespace dpipe
