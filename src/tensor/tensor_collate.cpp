// Stacking the rows of one field into a batch tensor, with padding.

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#if defined(__x86_64__)
#include <emmintrin.h>
#endif

#include <fmt/format.h>

#include <dpipe/tensor/tensor_collate.hpp>

namespace dpipe::detail {

namespace {

std::string shape_text(const TensorRow& row) {
  return fmt::format("[{}]", fmt::join(std::span(row.shape.data(), row.rank), ", "));
}

std::string row_text(const TensorRow& row) { return fmt::format("{}{}", dtype_name(row.dtype), shape_text(row)); }

/// `value` as one element of `dtype`, in `out` (8 bytes suffice for every DType).
void encode_scalar(DType dtype, double value, std::byte* out) {
  const auto put = [&](auto converted) { std::memcpy(out, &converted, sizeof(converted)); };
  switch (dtype) {
    case DType::kBool:
      return put(static_cast<std::uint8_t>(value != 0.0 ? 1 : 0));
    case DType::kUInt8:
      return put(static_cast<std::uint8_t>(value));
    case DType::kInt8:
      return put(static_cast<std::int8_t>(value));
    case DType::kUInt16:
      return put(static_cast<std::uint16_t>(value));
    case DType::kInt16:
      return put(static_cast<std::int16_t>(value));
    case DType::kUInt32:
      return put(static_cast<std::uint32_t>(value));
    case DType::kInt32:
      return put(static_cast<std::int32_t>(value));
    case DType::kUInt64:
      return put(static_cast<std::uint64_t>(value));
    case DType::kInt64:
      return put(static_cast<std::int64_t>(value));
    case DType::kFloat32:
      return put(static_cast<float>(value));
    case DType::kFloat64:
      return put(value);
  }
}

/// Whether `value` converts to `dtype` without undefined behaviour (an integer type's range; NaN
/// only for the floating types).
bool holds(DType dtype, double value) {
  const auto within = [&](auto low, auto high) {
    return !std::isnan(value) && value >= static_cast<double>(low) && value <= static_cast<double>(high);
  };
  switch (dtype) {
    case DType::kBool:
      return !std::isnan(value);
    case DType::kUInt8:
      return within(0, 255);
    case DType::kInt8:
      return within(-128, 127);
    case DType::kUInt16:
      return within(0, 65535);
    case DType::kInt16:
      return within(-32768, 32767);
    case DType::kUInt32:
      return within(0, 4294967295.0);
    case DType::kInt32:
      return within(-2147483648.0, 2147483647.0);
    case DType::kUInt64:
      return within(0, 18446744073709549568.0);  // the largest double below 2^64
    case DType::kInt64:
      return within(-9223372036854775808.0, 9223372036854774784.0);  // the largest double below 2^63
    case DType::kFloat32:
      return std::isnan(value) || std::isinf(value) || std::fabs(value) <= 3.4028234663852886e38;
    case DType::kFloat64:
      return true;
  }
  return false;
}

/// Fills `bytes` bytes at `out` with copies of the element `element` of `size` bytes.
void fill(std::byte* out, std::size_t bytes, const std::byte* element, std::size_t size) {
  if (bytes == 0) return;  // `out` may be null: an empty batch tensor has no buffer
  if (std::all_of(element, element + size, [](std::byte b) { return b == std::byte{0}; })) {
    std::memset(out, 0, bytes);
    return;
  }
  for (std::size_t at = 0; at < bytes; at += size) std::memcpy(out + at, element, size);
}

/// Throws InvalidArgument when row `index` differs from row 0 (`first`) in dtype, rank or a
/// dimension (but the first one, when padding).
void check_row(const TensorRow& row, std::size_t index, const TensorRow& first, const StackField& field) {
  if (row.dtype != first.dtype) {
    DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: field '{}' of row {} is {}, row 0 is {}", field.type, field.name,
                index, row_text(row), row_text(first));
  }
  const bool padding = field.pad.has_value();
  const std::size_t extended = padding ? 1 : 0;  // the dimension padding may extend
  const bool same_rest =
      row.rank == first.rank &&
      std::equal(row.shape.begin() + extended, row.shape.begin() + row.rank, first.shape.begin() + extended);
  if (!same_rest) {
    DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: field '{}' of row {} has shape {}, row 0 has shape {}; {}",
                field.type, field.name, index, shape_text(row), shape_text(first),
                padding ? "padding extends the first dimension only"
                        : fmt::format("the rows of a batch must have the same shape, or pad the field with "
                                      "tensor_collate<{}>().pad(&{}::{}, value)",
                                      field.type, field.type, field.name));
  }
}

/// The padded row shape of `rows`: their common shape, with the longest first dimension when
/// padding. Throws InvalidArgument for rows that differ in dtype, rank or another dimension.
TensorRow batch_row(std::span<const TensorRow> rows, const StackField& field) {
  TensorRow widest = rows.front();
  const bool padding = field.pad.has_value();
  if (padding && widest.rank == 0) {
    DPIPE_THROW(InvalidArgument,
                "tensor_collate<{}>: field '{}' is a scalar; only fields with dimensions can be padded", field.type,
                field.name);
  }
  for (std::size_t index = 1; index < rows.size(); ++index) {
    check_row(rows[index], index, rows.front(), field);
    if (padding) widest.shape[0] = std::max(widest.shape[0], rows[index].shape[0]);
  }
  return widest;
}

/// A batch at least this large is written past the caches: it would not stay in a core's cache
/// anyway, and only evict the rows still to be read (and it is read next in another process, from
/// memory, when a worker process made it).
constexpr std::size_t kStreamingBatchBytes = std::size_t{8} << 20;

/// memcpy with non-temporal stores where the CPU has them (x86-64: SSE2): no cache line of `out`
/// is read before it is written, a third less memory traffic for a copy that misses the caches.
void copy_streaming(std::byte* out, const std::byte* in, std::size_t bytes) {
  if (bytes == 0) return;
#if defined(__x86_64__)
  const std::size_t head = std::min(bytes, (16 - reinterpret_cast<std::uintptr_t>(out) % 16) % 16);
  std::memcpy(out, in, head);
  std::size_t at = head;
  for (; at + 64 <= bytes; at += 64) {
    const auto* from = reinterpret_cast<const __m128i*>(in + at);
    auto* to = reinterpret_cast<__m128i*>(out + at);
    const __m128i a = _mm_loadu_si128(from);
    const __m128i b = _mm_loadu_si128(from + 1);
    const __m128i c = _mm_loadu_si128(from + 2);
    const __m128i d = _mm_loadu_si128(from + 3);
    _mm_stream_si128(to, a);
    _mm_stream_si128(to + 1, b);
    _mm_stream_si128(to + 2, c);
    _mm_stream_si128(to + 3, d);
  }
  std::memcpy(out + at, in + at, bytes - at);
#else
  std::memcpy(out, in, bytes);
#endif
}

/// Copies a row of `bytes` to `out`, past the caches when `streaming` (then end_streaming() after
/// the batch's last row).
void copy_row(std::byte* out, const void* row, std::size_t bytes, bool streaming) {
  if (streaming) {
    copy_streaming(out, static_cast<const std::byte*>(row), bytes);
  } else if (bytes != 0) {
    std::memcpy(out, row, bytes);
  }
}

/// Orders the streamed stores before the batch is handed on.
void end_streaming() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

std::size_t row_elements(const TensorRow& row) {
  std::size_t count = 1;
  for (std::size_t dim = 0; dim < row.rank; ++dim) count *= static_cast<std::size_t>(row.shape[dim]);
  return count;
}

/// The shape [rows, row shape...] of a batch of `rows` rows of `row`.
std::array<std::int64_t, Tensor::kMaxRank> batch_shape(const TensorRow& row, std::size_t rows,
                                                       const StackField& field) {
  if (row.rank == Tensor::kMaxRank) {
    DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: field '{}' has {} dimensions, and a batch adds one (at most {})",
                field.type, field.name, row.rank, Tensor::kMaxRank);
  }
  std::array<std::int64_t, Tensor::kMaxRank> shape{};
  shape[0] = static_cast<std::int64_t>(rows);
  std::copy_n(row.shape.begin(), row.rank, shape.begin() + 1);
  return shape;
}

}  // namespace

Tensor stack_rows(std::span<const TensorRow> rows, const StackField& field, Tensor* lengths) {
  const HostAllocatorPtr& allocator = *field.allocator;
  const TensorRow widest = rows.empty() ? field.empty_row : batch_row(rows, field);
  if (field.pad && !holds(widest.dtype, *field.pad)) {
    DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: the pad value {} of field '{}' does not fit its type {}",
                field.type, *field.pad, field.name, dtype_name(widest.dtype));
  }
  auto shape = batch_shape(widest, rows.size(), field);
  if (rows.empty() && field.pad && widest.rank > 0) shape[1] = 0;  // no row to pad to
  Tensor batch(widest.dtype, std::span<const std::int64_t>(shape.data(), widest.rank + 1), allocator);

  const std::size_t element = dtype_size(widest.dtype);
  const std::size_t stride = row_elements(widest) * element;
  auto* out = static_cast<std::byte*>(batch.data());
  std::array<std::byte, 8> pad{};
  if (field.pad) {
    encode_scalar(widest.dtype, *field.pad, pad.data());
    *lengths = Tensor(DType::kInt64, {static_cast<std::int64_t>(rows.size())}, allocator);
  }
  const bool streaming = batch.nbytes() >= kStreamingBatchBytes;
  for (std::size_t index = 0; index < rows.size(); ++index) {
    const std::size_t bytes = row_elements(rows[index]) * element;
    copy_row(out + index * stride, rows[index].data, bytes, streaming);
    if (field.pad) {
      fill(out + index * stride + bytes, stride - bytes, pad.data(), element);
      lengths->values<std::int64_t>()[index] = rows[index].shape[0];
    }
  }
  if (streaming) end_streaming();
  return batch;
}

RowStacker::RowStacker(const StackField& field, std::size_t capacity, const TensorRow& first)
    : field_(&field), capacity_(capacity), first_(first) {
  const auto shape = batch_shape(first, capacity, field);
  batch_ = Tensor(first.dtype, std::span<const std::int64_t>(shape.data(), first.rank + 1), *field.allocator);
  row_bytes_ = row_elements(first) * dtype_size(first.dtype);
  streaming_ = batch_.nbytes() >= kStreamingBatchBytes;
}

void RowStacker::add(const TensorRow& row, std::size_t index) {
  if (index >= capacity_) {
    DPIPE_THROW(Error, "dpipe internal error: row {} of a batch of {}", index, capacity_);
  }
  if (index != 0) check_row(row, index, first_, *field_);
  copy_row(static_cast<std::byte*>(batch_.data()) + index * row_bytes_, row.data, row_bytes_, streaming_);
}

Tensor RowStacker::finish(std::size_t rows) {
  if (streaming_) end_streaming();
  if (rows == capacity_) return std::move(batch_);
  const auto shape = batch_shape(first_, rows, *field_);
  return Tensor::from_storage(first_.dtype, std::span<const std::int64_t>(shape.data(), first_.rank + 1),
                              batch_.storage());
}

}  // namespace dpipe::detail
