#pragma once
/// \file
/// to_dlpack: a dpipe::Tensor, each tensor of a TensorBatch, or a column of Columns<S>, as a
/// DLManagedTensor (DLPack, <dlpack/dlpack.h> from Debian's libdlpack-dev), without a copy. Every
/// framework takes one: `torch::fromDLPack(dpipe::to_dlpack(batch[&Sample::image]).release())`,
/// JAX, TensorFlow, CuPy, NumPy.
///
/// The DLManagedTensor holds a reference to the buffer: the tensor it becomes may outlive the
/// batch, the loader's iteration and the loader. Its deleter (called once, by the framework, or by
/// DLPackTensor's destructor when never released) drops that reference; the buffer goes back to its
/// allocator when the last reference goes. The device is kDLCPU, pinned buffers included (the
/// consumer can ask the CUDA runtime whether a pointer is pinned; torch does). A bool tensor
/// exports as kDLUInt of 8 bits (DLPack 0.6 has no bool code). Thread-safety: the export is a
/// value; call the deleter once, from any thread.

#include <cstdint>
#include <dlpack/dlpack.h>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include <dpipe/core/fields.hpp>
#include <dpipe/tensor/tensor.hpp>
#include <dpipe/tensor/tensor_collate.hpp>

namespace dpipe {

/// Calls a DLManagedTensor's deleter.
struct DLPackDeleter {
  void operator()(DLManagedTensor* tensor) const noexcept {
    if (tensor != nullptr && tensor->deleter != nullptr) tensor->deleter(tensor);
  }
};

/// An exported tensor: hand it to a framework with release(), or let it go to drop the reference.
using DLPackTensor = std::unique_ptr<DLManagedTensor, DLPackDeleter>;

namespace detail {
/// A DLManagedTensor of `data` (kept alive by `owner`) with `dtype` and `shape`.
DLPackTensor export_dlpack(std::shared_ptr<void> owner, void* data, DType dtype, std::span<const std::int64_t> shape);
}  // namespace detail

/// `tensor` as DLPack, sharing its buffer. Throws InvalidArgument for an undefined tensor.
[[nodiscard]] DLPackTensor to_dlpack(const Tensor& tensor);

/// Each of `batch`'s field tensors as DLPack, in DPIPE_FIELDS order, sharing their buffers.
template <has_fields S>
[[nodiscard]] std::vector<DLPackTensor> to_dlpack(const TensorBatch<S>& batch) {
  std::vector<DLPackTensor> exported;
  exported.reserve(batch.tensors().size());
  for (const auto& tensor : batch.tensors()) exported.push_back(to_dlpack(tensor));
  return exported;
}

/// A column of arithmetic values (a Columns<S> column, moved out of the batch) as a 1-D DLPack
/// tensor: the vector moves into the export, its elements are not copied.
template <tensor_scalar T>
[[nodiscard]] DLPackTensor to_dlpack(std::vector<T>&& column) {
  auto owner = std::make_shared<std::vector<T>>(std::move(column));
  const std::int64_t shape[] = {static_cast<std::int64_t>(owner->size())};
  void* data = owner->data();
  return detail::export_dlpack(std::move(owner), data, dtype_of<T>(), shape);
}

}  // namespace dpipe
