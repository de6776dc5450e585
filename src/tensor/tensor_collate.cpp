// Stacking the rows of one field into a batch tensor, with padding.

#include <algorithm>
#include <cmath>
#include <cstring>

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
    const TensorRow& row = rows[index];
    if (row.dtype != widest.dtype) {
      DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: field '{}' of row {} is {}, row 0 is {}", field.type,
                  field.name, index, row_text(row), row_text(rows.front()));
    }
    const bool same_rank = row.rank == widest.rank;
    const std::size_t first = padding ? 1 : 0;  // the dimension padding may extend
    const bool same_rest = same_rank && std::equal(row.shape.begin() + first, row.shape.begin() + row.rank,
                                                   rows.front().shape.begin() + first);
    if (!same_rest) {
      DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: field '{}' of row {} has shape {}, row 0 has shape {}; {}",
                  field.type, field.name, index, shape_text(row), shape_text(rows.front()),
                  padding ? "padding extends the first dimension only"
                          : fmt::format("the rows of a batch must have the same shape, or pad the field with "
                                        "tensor_collate<{}>().pad(&{}::{}, value)",
                                        field.type, field.type, field.name));
    }
    if (padding) widest.shape[0] = std::max(widest.shape[0], row.shape[0]);
  }
  return widest;
}

std::size_t row_elements(const TensorRow& row) {
  std::size_t count = 1;
  for (std::size_t dim = 0; dim < row.rank; ++dim) count *= static_cast<std::size_t>(row.shape[dim]);
  return count;
}

}  // namespace

Tensor stack_rows(std::span<const TensorRow> rows, const StackField& field, Tensor* lengths) {
  const HostAllocatorPtr& allocator = *field.allocator;
  const TensorRow widest = rows.empty() ? field.empty_row : batch_row(rows, field);
  if (field.pad && !holds(widest.dtype, *field.pad)) {
    DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: the pad value {} of field '{}' does not fit its type {}",
                field.type, *field.pad, field.name, dtype_name(widest.dtype));
  }
  if (widest.rank == Tensor::kMaxRank) {
    DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: field '{}' has {} dimensions, and a batch adds one (at most {})",
                field.type, field.name, widest.rank, Tensor::kMaxRank);
  }
  std::array<std::int64_t, Tensor::kMaxRank> shape{};
  shape[0] = static_cast<std::int64_t>(rows.size());
  if (rows.empty() && field.pad && widest.rank > 0) shape[1] = 0;  // no row to pad to
  std::copy_n(widest.shape.begin(), widest.rank, shape.begin() + 1);
  Tensor batch(widest.dtype, std::span<const std::int64_t>(shape.data(), widest.rank + 1), allocator);

  const std::size_t element = dtype_size(widest.dtype);
  const std::size_t stride = row_elements(widest) * element;
  auto* out = static_cast<std::byte*>(batch.data());
  std::array<std::byte, 8> pad{};
  if (field.pad) {
    encode_scalar(widest.dtype, *field.pad, pad.data());
    *lengths = Tensor(DType::kInt64, {static_cast<std::int64_t>(rows.size())}, allocator);
  }
  for (std::size_t index = 0; index < rows.size(); ++index) {
    const std::size_t bytes = row_elements(rows[index]) * element;
    if (bytes != 0) std::memcpy(out + index * stride, rows[index].data, bytes);
    if (field.pad) {
      fill(out + index * stride + bytes, stride - bytes, pad.data(), element);
      lengths->values<std::int64_t>()[index] = rows[index].shape[0];
    }
  }
  return batch;
}

}  // namespace dpipe::detail
