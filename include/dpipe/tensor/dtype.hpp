#pragma once
/// \file
/// DType: the element types a dpipe::Tensor holds, and the C++ arithmetic type of each.

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace dpipe {

/// A tensor's element type. The numbering is part of the checkpoint and worker encoding: append
/// only.
enum class DType : std::uint8_t {
  kBool = 0,
  kUInt8 = 1,
  kInt8 = 2,
  kUInt16 = 3,
  kInt16 = 4,
  kUInt32 = 5,
  kInt32 = 6,
  kUInt64 = 7,
  kInt64 = 8,
  kFloat32 = 9,
  kFloat64 = 10,
};

/// The number of DType values (one past the last).
inline constexpr std::uint8_t kDTypeCount = 11;

/// Bytes of one element of `dtype`.
[[nodiscard]] constexpr std::size_t dtype_size(DType dtype) noexcept {
  switch (dtype) {
    case DType::kBool:
    case DType::kUInt8:
    case DType::kInt8:
      return 1;
    case DType::kUInt16:
    case DType::kInt16:
      return 2;
    case DType::kUInt32:
    case DType::kInt32:
    case DType::kFloat32:
      return 4;
    case DType::kUInt64:
    case DType::kInt64:
    case DType::kFloat64:
      return 8;
  }
  return 0;
}

/// "uint8", "float32", ...: the name torch and NumPy give the type.
[[nodiscard]] std::string_view dtype_name(DType dtype) noexcept;

namespace detail {
template <class T>
constexpr bool is_tensor_scalar_v =
    std::is_arithmetic_v<T> && !std::is_same_v<T, char> && !std::is_same_v<T, long double> && sizeof(T) <= 8;
}  // namespace detail

/// The arithmetic types a Tensor can hold (char, whose signedness varies, and long double are not).
template <class T>
concept tensor_scalar = detail::is_tensor_scalar_v<T>;

/// The DType of arithmetic type T.
template <tensor_scalar T>
[[nodiscard]] constexpr DType dtype_of() noexcept {
  if constexpr (std::is_same_v<T, bool>) {
    return DType::kBool;
  } else if constexpr (std::is_floating_point_v<T>) {
    return sizeof(T) == 4 ? DType::kFloat32 : DType::kFloat64;
  } else if constexpr (std::is_signed_v<T>) {
    constexpr DType kSigned[] = {DType::kInt8,  DType::kInt16, DType::kInt16, DType::kInt32,
                                 DType::kInt32, DType::kInt64, DType::kInt64, DType::kInt64};
    return kSigned[sizeof(T) - 1];
  } else {
    constexpr DType kUnsigned[] = {DType::kUInt8,  DType::kUInt16, DType::kUInt16, DType::kUInt32,
                                   DType::kUInt32, DType::kUInt64, DType::kUInt64, DType::kUInt64};
    return kUnsigned[sizeof(T) - 1];
  }
}

}  // namespace dpipe
