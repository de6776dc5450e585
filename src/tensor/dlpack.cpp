#include <algorithm>
#include <array>

#include <dpipe/tensor/dlpack.hpp>

namespace dpipe {

namespace {

/// What a DLManagedTensor's manager_ctx holds: the owner and the arrays its DLTensor points at.
struct DLPackContext {
  DLManagedTensor managed{};
  std::shared_ptr<void> owner;
  std::array<std::int64_t, Tensor::kMaxRank> shape{};
  std::array<std::int64_t, Tensor::kMaxRank> strides{};
};

DLDataType dlpack_type(DType dtype) {
  const auto bits = static_cast<std::uint8_t>(dtype_size(dtype) * 8);
  switch (dtype) {
    case DType::kFloat32:
    case DType::kFloat64:
      return {kDLFloat, bits, 1};
    case DType::kInt8:
    case DType::kInt16:
    case DType::kInt32:
    case DType::kInt64:
      return {kDLInt, bits, 1};
    case DType::kBool:
    case DType::kUInt8:
    case DType::kUInt16:
    case DType::kUInt32:
    case DType::kUInt64:
      break;
  }
  return {kDLUInt, bits, 1};
}

}  // namespace

namespace detail {

DLPackTensor export_dlpack(std::shared_ptr<void> owner, void* data, DType dtype, std::span<const std::int64_t> shape) {
  auto context = std::make_unique<DLPackContext>();
  context->owner = std::move(owner);
  std::copy(shape.begin(), shape.end(), context->shape.begin());
  std::int64_t stride = 1;
  for (std::size_t dim = shape.size(); dim-- > 0;) {
    context->strides[dim] = stride;
    stride *= std::max<std::int64_t>(shape[dim], 1);
  }
  DLTensor& tensor = context->managed.dl_tensor;
  tensor.data = data;
  tensor.device = {kDLCPU, 0};
  tensor.ndim = static_cast<int>(shape.size());
  tensor.dtype = dlpack_type(dtype);
  tensor.shape = context->shape.data();
  tensor.strides = context->strides.data();
  tensor.byte_offset = 0;
  context->managed.manager_ctx = context.get();
  context->managed.deleter = [](DLManagedTensor* self) { delete static_cast<DLPackContext*>(self->manager_ctx); };
  return DLPackTensor(&context.release()->managed);
}

}  // namespace detail

DLPackTensor to_dlpack(const Tensor& tensor) {
  if (!tensor.defined()) DPIPE_THROW(InvalidArgument, "to_dlpack: the tensor is undefined");
  return detail::export_dlpack(tensor.storage(), tensor.data(), tensor.dtype(), tensor.shape());
}

}  // namespace dpipe
