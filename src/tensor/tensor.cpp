#include <algorithm>
#include <limits>

#include <fmt/format.h>

#include <dpipe/tensor/tensor.hpp>

#include "tensor/tensor_arena.hpp"

namespace dpipe {

namespace detail {

bool shape_fits(std::span<const std::int64_t> shape, std::size_t element_bytes) {
  // Every extent (0 counting as 1) multiplied together, times the element's bytes, within int64:
  // the strides, the element count and the byte size then never overflow.
  std::uint64_t limit = static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) / element_bytes;
  for (const auto extent : shape) {
    const auto factor = static_cast<std::uint64_t>(std::max<std::int64_t>(extent, 1));
    if (factor > limit) return false;
    limit /= factor;
  }
  return true;
}

}  // namespace detail

std::string_view dtype_name(DType dtype) noexcept {
  switch (dtype) {
    case DType::kBool:
      return "bool";
    case DType::kUInt8:
      return "uint8";
    case DType::kInt8:
      return "int8";
    case DType::kUInt16:
      return "uint16";
    case DType::kInt16:
      return "int16";
    case DType::kUInt32:
      return "uint32";
    case DType::kInt32:
      return "int32";
    case DType::kUInt64:
      return "uint64";
    case DType::kInt64:
      return "int64";
    case DType::kFloat32:
      return "float32";
    case DType::kFloat64:
      return "float64";
  }
  return "unknown";
}

TensorStorage::TensorStorage(HostAllocatorPtr allocator, std::size_t bytes)
    : allocator_(std::move(allocator)), bytes_(bytes) {
  if (bytes_ != 0) data_ = allocator_->allocate(bytes_);
}

TensorStorage::TensorStorage(HostAllocatorPtr allocator, void* data, std::size_t bytes)
    : allocator_(std::move(allocator)), bytes_(data != nullptr ? bytes : 0), data_(data) {
  if (allocator_ == nullptr) DPIPE_THROW(InvalidArgument, "TensorStorage: the allocator is null");
}

TensorStorage::~TensorStorage() {
  if (data_ != nullptr) allocator_->deallocate(data_, bytes_);
}

Tensor::Tensor(DType dtype, std::span<const std::int64_t> shape, HostAllocatorPtr allocator) : dtype_(dtype) {
  set_shape(shape);
  storage_ =
      std::make_shared<TensorStorage>(allocator != nullptr ? std::move(allocator) : current_host_allocator(), nbytes());
}

Tensor Tensor::from_storage(DType dtype, std::span<const std::int64_t> shape, std::shared_ptr<TensorStorage> storage) {
  Tensor tensor;
  tensor.dtype_ = dtype;
  tensor.set_shape(shape);
  if (storage == nullptr) DPIPE_THROW(InvalidArgument, "Tensor: the storage is null");
  tensor.storage_ = std::move(storage);
  if (tensor.storage_->bytes() < tensor.nbytes()) {
    const std::size_t bytes = tensor.storage_->bytes();
    DPIPE_THROW(InvalidArgument, "Tensor: a storage of {} bytes cannot hold {} ({} bytes)", bytes, tensor.describe(),
                tensor.nbytes());
  }
  return tensor;
}

void Tensor::set_shape(std::span<const std::int64_t> shape) {
  if (static_cast<std::uint8_t>(dtype_) >= kDTypeCount) {
    DPIPE_THROW(InvalidArgument, "Tensor: {} is not a DType", static_cast<unsigned>(dtype_));
  }
  if (shape.size() > kMaxRank) {
    DPIPE_THROW(InvalidArgument, "Tensor: {} dimensions, at most {} are supported", shape.size(), kMaxRank);
  }
  rank_ = shape.size();
  for (std::size_t dim = 0; dim < rank_; ++dim) {
    if (shape[dim] < 0) DPIPE_THROW(InvalidArgument, "Tensor: dimension {} is {}, negative", dim, shape[dim]);
    shape_[dim] = shape[dim];
  }
  if (!detail::shape_fits(this->shape(), dtype_size(dtype_))) {
    DPIPE_THROW(InvalidArgument, "Tensor: a shape of {} elements of {} bytes overflows", fmt::join(shape, " x "),
                dtype_size(dtype_));
  }
  numel_ = 1;
  for (std::size_t dim = 0; dim < rank_; ++dim) numel_ *= static_cast<std::size_t>(shape_[dim]);
  // Row-major strides; a dimension of 0 counts as 1, as torch's contiguous strides do.
  std::int64_t stride = 1;
  for (std::size_t dim = rank_; dim-- > 0;) {
    strides_[dim] = stride;
    stride *= std::max<std::int64_t>(shape_[dim], 1);
  }
}

Tensor Tensor::clone(HostAllocatorPtr allocator) const {
  if (!defined()) return {};
  Tensor copy(dtype_, shape(), std::move(allocator));
  if (nbytes() != 0) std::memcpy(copy.data(), data(), nbytes());
  return copy;
}

std::string Tensor::describe() const {
  if (!defined()) return "undefined";
  return fmt::format("{}[{}]", dtype_name(dtype_), fmt::join(shape(), ", "));
}

bool Tensor::operator==(const Tensor& other) const {
  if (defined() != other.defined()) return false;
  if (!defined()) return true;
  if (dtype_ != other.dtype_ || rank_ != other.rank_) return false;
  for (std::size_t dim = 0; dim < rank_; ++dim) {
    if (shape_[dim] != other.shape_[dim]) return false;
  }
  return nbytes() == 0 || std::memcmp(data(), other.data(), nbytes()) == 0;
}

void Tensor::require_dtype(DType dtype) const {
  if (!defined()) DPIPE_THROW(InvalidArgument, "Tensor: the tensor is undefined");
  if (dtype != dtype_) {
    DPIPE_THROW(InvalidArgument, "Tensor: asked for {} values of a {} tensor", dtype_name(dtype), describe());
  }
}

void Tensor::require_elements(std::size_t count) const {
  if (count != numel_) {
    DPIPE_THROW(InvalidArgument, "Tensor: {} values for the shape [{}] of {} elements", count, fmt::join(shape(), ", "),
                numel_);
  }
}

namespace {

/// What the first byte of a tensor's encoding says follows.
enum class Encoded : std::uint8_t {
  kUndefined = 0,
  kBytes = 1,      // the dtype, the shape and the bytes
  kReference = 2,  // the dtype, the shape, an arena's id and a block's offset (a worker's tensor)
};

/// The handover of the element this thread encodes, when `tensor` lies in its arena; else null.
detail::TensorHandoverScope* handover_of(const Tensor& tensor) {
  auto* scope = detail::TensorHandoverScope::current();
  if (scope == nullptr || tensor.nbytes() == 0) return nullptr;
  return scope->arena().starts_block(tensor.data()) ? scope : nullptr;
}

}  // namespace

void Serializer<Tensor>::write(ByteWriter& writer, const Tensor& tensor) {
  if (!tensor.defined()) {
    writer.write(Encoded::kUndefined);
    return;
  }
  auto* handover = handover_of(tensor);
  writer.write(handover != nullptr ? Encoded::kReference : Encoded::kBytes);
  writer.write(static_cast<std::uint8_t>(tensor.dtype()));
  writer.write(static_cast<std::uint8_t>(tensor.rank()));
  writer.write_bytes(tensor.shape().data(), tensor.rank() * sizeof(std::int64_t));
  if (handover == nullptr) {
    writer.write_bytes(tensor.data(), tensor.nbytes());
    return;
  }
  writer.write(handover->arena().id());
  writer.write(handover->hand_over(tensor.data(), tensor.nbytes()));
}

Tensor Serializer<Tensor>::read(ByteReader& reader) {
  const auto encoded = reader.read<std::uint8_t>();
  if (encoded == static_cast<std::uint8_t>(Encoded::kUndefined)) return {};
  if (encoded != static_cast<std::uint8_t>(Encoded::kBytes) &&
      encoded != static_cast<std::uint8_t>(Encoded::kReference)) {
    DPIPE_THROW(SerializationError, "corrupt input: {} does not start a tensor", encoded);
  }
  const auto dtype = reader.read<std::uint8_t>();
  const auto rank = reader.read<std::uint8_t>();
  if (dtype >= kDTypeCount) DPIPE_THROW(SerializationError, "corrupt input: {} is not a tensor dtype", dtype);
  if (rank > Tensor::kMaxRank) DPIPE_THROW(SerializationError, "corrupt input: a tensor of {} dimensions", rank);
  std::array<std::int64_t, Tensor::kMaxRank> shape{};
  reader.read_bytes(shape.data(), rank * sizeof(std::int64_t));
  const std::span<const std::int64_t> dims(shape.data(), rank);
  for (const auto extent : dims) {
    if (extent < 0) DPIPE_THROW(SerializationError, "corrupt input: a tensor of shape [{}]", fmt::join(dims, ", "));
  }
  if (!detail::shape_fits(dims, dtype_size(static_cast<DType>(dtype)))) {
    DPIPE_THROW(SerializationError, "corrupt input: a tensor of shape [{}] overflows", fmt::join(dims, ", "));
  }
  if (encoded == static_cast<std::uint8_t>(Encoded::kReference)) {
    const auto arena_id = reader.read<std::uint64_t>();
    const auto offset = reader.read<std::uint64_t>();
    const auto arena = detail::find_tensor_arena(arena_id);
    if (arena == nullptr) {
      DPIPE_THROW(SerializationError,
                  "a tensor of shape [{}] in the tensor arena of a worker process that this process does not map "
                  "(its loader is gone, or the bytes come from another process)",
                  fmt::join(dims, ", "));
    }
    std::size_t bytes = dtype_size(static_cast<DType>(dtype));
    for (const auto extent : dims) bytes *= static_cast<std::size_t>(extent);
    return Tensor::from_storage(static_cast<DType>(dtype), dims, arena->adopt(offset, bytes));
  }
  // Checks the size against the input before allocating: a corrupt shape must not allocate.
  bool empty = false;
  for (const auto extent : dims) empty = empty || extent == 0;
  std::size_t bytes = dtype_size(static_cast<DType>(dtype));
  for (const auto extent : empty ? std::span<const std::int64_t>() : dims) {
    if (static_cast<std::uint64_t>(extent) > reader.remaining() / bytes) {
      DPIPE_THROW(SerializationError, "corrupt input: a tensor of shape [{}] exceeds the {} bytes left",
                  fmt::join(dims, ", "), reader.remaining());
    }
    bytes *= static_cast<std::size_t>(extent);
  }
  Tensor tensor(static_cast<DType>(dtype), dims);
  reader.read_bytes(tensor.data(), tensor.nbytes());
  return tensor;
}

}  // namespace dpipe
