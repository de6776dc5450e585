#pragma once
/// \file
/// dpipe::Tensor: an n-dimensional array of one arithmetic type in one owned, aligned, contiguous
/// (row-major) buffer from a HostAllocator. It is an element type like any other: it crosses worker
/// processes (decoded straight into a buffer of the receiving thread's allocator, one copy), it is
/// saved in checkpoints, and tensor_collate stacks a batch of them. Export it to a framework with
/// to_dlpack (<dpipe/tensor/dlpack.hpp>), without a copy.
///
/// Copies share the buffer, as torch::Tensor's do; clone() copies it. Thread-safety: a value; two
/// threads may read one tensor, or copies of it, at once; writing the shared buffer from two
/// threads is a race, as for any buffer.

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>

#include <dpipe/core/error.hpp>
#include <dpipe/serialization/serializer.hpp>
#include <dpipe/tensor/dtype.hpp>
#include <dpipe/tensor/host_allocator.hpp>

namespace dpipe {

namespace detail {
/// Whether a tensor of `shape` (extents >= 0) with elements of `element_bytes` has strides, an
/// element count and a byte size that fit in int64 (a 0 extent counts as 1).
[[nodiscard]] bool shape_fits(std::span<const std::int64_t> shape, std::size_t element_bytes);
}  // namespace detail

/// A buffer of `bytes` from `allocator`, given back when the last owner lets go. Thread-safety:
/// immutable after construction.
class TensorStorage {
 public:
  /// Allocates `bytes` (may be 0: then no memory and a null data()).
  TensorStorage(HostAllocatorPtr allocator, std::size_t bytes);
  /// Takes `data`, a block of `bytes` that `allocator` gave out, and gives it back to `allocator`
  /// when destroyed (a null `data` takes nothing). Throws InvalidArgument for a null `allocator`.
  TensorStorage(HostAllocatorPtr allocator, void* data, std::size_t bytes);
  ~TensorStorage();
  TensorStorage(const TensorStorage&) = delete;
  TensorStorage& operator=(const TensorStorage&) = delete;

  [[nodiscard]] void* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] const HostAllocatorPtr& allocator() const noexcept { return allocator_; }

 private:
  HostAllocatorPtr allocator_;
  std::size_t bytes_ = 0;
  void* data_ = nullptr;
};

class Tensor {
 public:
  static constexpr std::size_t kMaxRank = 8;

  /// An undefined tensor: no buffer, rank 0 (defined() is false).
  Tensor() = default;
  /// A tensor of `shape` (each dimension >= 0, at most kMaxRank of them) whose contents are
  /// uninitialized, in a buffer from `allocator`, or from current_host_allocator() when null.
  /// Throws InvalidArgument for a negative dimension, too many dimensions, or a size that
  /// overflows.
  Tensor(DType dtype, std::span<const std::int64_t> shape, HostAllocatorPtr allocator = nullptr);
  Tensor(DType dtype, std::initializer_list<std::int64_t> shape, HostAllocatorPtr allocator = nullptr)
      : Tensor(dtype, std::span<const std::int64_t>(shape.begin(), shape.size()), std::move(allocator)) {}

  /// A tensor of `shape` holding a copy of `values` (whose size must be the shape's element count;
  /// an empty shape means the 1-D shape [values.size()]).
  template <tensor_scalar T>
  [[nodiscard]] static Tensor from(std::span<const T> values, std::span<const std::int64_t> shape = {}) {
    const std::int64_t flat[] = {static_cast<std::int64_t>(values.size())};
    Tensor tensor(dtype_of<T>(), shape.empty() ? std::span<const std::int64_t>(flat) : shape);
    tensor.require_elements(values.size());
    if (!values.empty()) std::memcpy(tensor.data(), values.data(), values.size_bytes());
    return tensor;
  }
  template <tensor_scalar T>
  [[nodiscard]] static Tensor from(std::initializer_list<T> values, std::initializer_list<std::int64_t> shape = {}) {
    return from(std::span<const T>(values.begin(), values.size()),
                std::span<const std::int64_t>(shape.begin(), shape.size()));
  }

  /// A tensor of `shape` over the first bytes of `storage`, which it shares (a buffer you allocated
  /// yourself, see TensorStorage). Throws InvalidArgument as the constructor does, for a null
  /// `storage`, and for one smaller than the shape's bytes.
  [[nodiscard]] static Tensor from_storage(DType dtype, std::span<const std::int64_t> shape,
                                           std::shared_ptr<TensorStorage> storage);

  [[nodiscard]] bool defined() const noexcept { return storage_ != nullptr; }
  [[nodiscard]] DType dtype() const noexcept { return dtype_; }
  [[nodiscard]] std::size_t rank() const noexcept { return rank_; }
  [[nodiscard]] std::span<const std::int64_t> shape() const noexcept { return {shape_.data(), rank_}; }
  /// Row-major strides, in elements (DLPack's convention); an extent of 0 counts as 1, as in
  /// torch's contiguous strides.
  [[nodiscard]] std::span<const std::int64_t> strides() const noexcept { return {strides_.data(), rank_}; }
  /// The number of elements (1 for rank 0).
  [[nodiscard]] std::size_t numel() const noexcept { return numel_; }
  [[nodiscard]] std::size_t nbytes() const noexcept { return numel_ * dtype_size(dtype_); }
  /// The first element; null for an undefined or empty tensor.
  [[nodiscard]] void* data() const noexcept { return storage_ ? storage_->data() : nullptr; }
  /// The elements as T. Throws InvalidArgument when T is not the tensor's dtype.
  template <tensor_scalar T>
  [[nodiscard]] std::span<T> values() const {
    require_dtype(dtype_of<T>());
    return {static_cast<T*>(data()), numel_};
  }
  /// The buffer's owner (shared with copies of this tensor); null when undefined.
  [[nodiscard]] const std::shared_ptr<TensorStorage>& storage() const noexcept { return storage_; }

  /// A tensor with a copy of the buffer, from `allocator` (current_host_allocator() when null).
  [[nodiscard]] Tensor clone(HostAllocatorPtr allocator = nullptr) const;

  /// "uint8[3, 224, 224]"; "undefined" for an undefined tensor.
  [[nodiscard]] std::string describe() const;

  /// Same definedness, dtype, shape and bytes.
  bool operator==(const Tensor& other) const;

 private:
  /// Sets the shape, the element count and the strides; throws as the constructors say.
  void set_shape(std::span<const std::int64_t> shape);
  void require_dtype(DType dtype) const;
  void require_elements(std::size_t count) const;

  DType dtype_ = DType::kUInt8;
  std::size_t rank_ = 0;
  std::size_t numel_ = 0;
  std::array<std::int64_t, kMaxRank> shape_{};
  std::array<std::int64_t, kMaxRank> strides_{};
  std::shared_ptr<TensorStorage> storage_;
};

/// Encodes the dtype, the shape and the bytes. Decoding allocates the buffer from the decoding
/// thread's current_host_allocator() and copies the bytes into it once. A worker process of
/// MultiProcessingReadingService sends the tensors it made in its tensor arena as references
/// instead, which the main process decodes without a copy (MultiProcessingOptions::tensor_arena_bytes);
/// anything else it encodes, and every checkpoint, holds the bytes.
template <>
struct Serializer<Tensor> {
  static constexpr std::size_t kMinSize = 1;
  static void write(ByteWriter& writer, const Tensor& tensor);
  static Tensor read(ByteReader& reader);
};

}  // namespace dpipe
