#pragma once
/// \file
/// tensor_collate<S>(): the collate function that turns a batch of a DPIPE_FIELDS struct S into a
/// TensorBatch<S>, one contiguous, aligned tensor per field of shape [batch, row shape...]:
///
///     struct Sample { dpipe::Tensor image; std::int64_t label; std::vector<std::int32_t> tokens;
///                     DPIPE_FIELDS(image, label, tokens) };
///     auto batches = samples.batch(256).collate(dpipe::tensor_collate<Sample>().pad(&Sample::tokens, 0));
///
/// A field may be an arithmetic scalar (shape [batch]), a std::array of them, nested for more
/// dimensions (std::array<std::array<float, 3>, 4>: [batch, 4, 3]), a std::span of them, a
/// std::vector of them (a row of its length), or a dpipe::Tensor (its dtype and shape).
///
/// Every row of a field must have the same shape (and, for tensors, dtype): a difference throws
/// InvalidArgument naming the field, the row and both shapes. `pad(&S::field, value)` instead pads
/// the field's first dimension to the batch's longest row with `value` (converted to the field's
/// type, which must hold it: -1 for an unsigned field is an InvalidArgument) and adds a lengths
/// tensor (int64 [batch], each row's own first dimension); the other dimensions must still agree.
/// An empty batch gives tensors of shape [0, row shape...] of a default-constructed field (a
/// Tensor field: uint8 [0]).
///
/// The buffers come from `allocator(...)` when given, else from the current_host_allocator() of
/// the thread that collates: a loader's worker threads and the trainer's thread use the loader's
/// (MultiProcessingOptions::pin_memory), worker processes the heap, from which a batch is decoded
/// straight into the trainer's allocator. Thread-safety: the collate function is a const value.

#include <array>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include <dpipe/core/detail/field_index.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/fields.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/serialization/serializer.hpp>
#include <dpipe/tensor/tensor.hpp>

namespace dpipe {

namespace detail {

/// One row of one field, as the stacking sees it.
struct TensorRow {
  DType dtype = DType::kUInt8;
  std::size_t rank = 0;
  std::array<std::int64_t, Tensor::kMaxRank> shape{};
  const void* data = nullptr;
};

/// What stacking a field needs besides its rows.
struct StackField {
  std::string_view type;  // S's name, for messages
  std::string name;       // the field's name
  std::optional<double> pad;
  const HostAllocatorPtr* allocator = nullptr;  // may point at null: the current allocator
  TensorRow empty_row{};                        // the row shape and dtype of an empty batch (a default field's)
};

/// Stacks `rows` into one tensor [rows.size(), shape...]; with `field.pad`, pads the first row
/// dimension and sets `lengths` (int64 [rows.size()]). Throws InvalidArgument for rows that differ,
/// and for a pad value the field's dtype cannot hold.
Tensor stack_rows(std::span<const TensorRow> rows, const StackField& field, Tensor* lengths);

/// How a field's value is seen as a row: view(value) and, for messages, the field's kind.
template <class F>
struct TensorRowOf;

template <tensor_scalar T>
struct TensorRowOf<T> {
  static TensorRow view(const T& value) { return {dtype_of<T>(), 0, {}, &value}; }
};

/// The element types of a std::array field: numbers, or std::arrays of them (nested).
template <class E>
struct is_array_element : std::bool_constant<tensor_scalar<E>> {};
template <class E, std::size_t N>
struct is_array_element<std::array<E, N>> : is_array_element<E> {};

template <class E, std::size_t N>
requires(is_array_element<E>::value&& N > 0) struct TensorRowOf<std::array<E, N>> {
  static_assert(sizeof(std::array<E, N>) == N * sizeof(E), "a std::array field must be contiguous");
  static TensorRow view(const std::array<E, N>& value) {
    // The element's shape, with the array's extent in front (nested arrays are contiguous).
    TensorRow row = TensorRowOf<E>::view(value[0]);
    if (row.rank == Tensor::kMaxRank) DPIPE_THROW(InvalidArgument, "tensor_collate: too many nested std::arrays");
    for (std::size_t dim = row.rank; dim > 0; --dim) row.shape[dim] = row.shape[dim - 1];
    row.shape[0] = static_cast<std::int64_t>(N);
    ++row.rank;
    row.data = value.data();
    return row;
  }
};

template <tensor_scalar T>
TensorRow flat_row(const T* data, std::size_t size) {
  TensorRow row{dtype_of<T>(), 1, {}, data};
  row.shape[0] = static_cast<std::int64_t>(size);
  return row;
}

template <tensor_scalar T, class Allocator>
struct TensorRowOf<std::vector<T, Allocator>> {
  static TensorRow view(const std::vector<T, Allocator>& value) { return flat_row(value.data(), value.size()); }
};

template <tensor_scalar T, std::size_t Extent>
struct TensorRowOf<std::span<T, Extent>> {
  static TensorRow view(const std::span<T, Extent>& value) {
    return flat_row<std::remove_const_t<T>>(value.data(), value.size());
  }
};

template <>
struct TensorRowOf<Tensor> {
  static TensorRow view(const Tensor& value) {
    if (!value.defined()) DPIPE_THROW(InvalidArgument, "tensor_collate: a row holds an undefined Tensor");
    TensorRow row{value.dtype(), value.rank(), {}, value.data()};
    for (std::size_t dim = 0; dim < value.rank(); ++dim) row.shape[dim] = value.shape()[dim];
    return row;
  }
};

}  // namespace detail

/// A field type tensor_collate can stack.
template <class F>
concept tensor_field = requires(const F& value) {
  { detail::TensorRowOf<F>::view(value) } -> std::same_as<detail::TensorRow>;
};

/// A batch of S as one tensor per field (in DPIPE_FIELDS order), plus a lengths tensor for each
/// padded field. Serializable: it crosses worker processes and is saved in checkpoints.
/// Thread-safety: a value (its tensors share their buffers with copies, as Tensor's do).
template <has_fields S>
class TensorBatch {
 public:
  static constexpr std::size_t kFields = std::tuple_size_v<decltype(std::declval<S&>().dpipe_fields())>;

  TensorBatch() = default;
  /// `tensors` and `lengths` hold kFields entries each; lengths[i] is undefined unless field i was
  /// padded.
  TensorBatch(std::uint64_t rows, std::vector<Tensor> tensors, std::vector<Tensor> lengths)
      : rows_(rows), tensors_(std::move(tensors)), lengths_(std::move(lengths)) {}

  /// The number of rows.
  [[nodiscard]] std::size_t size() const noexcept { return static_cast<std::size_t>(rows_); }
  /// Field I's tensor.
  template <std::size_t I>
  [[nodiscard]] const Tensor& get() const {
    static_assert(I < kFields);
    return tensors_.at(I);
  }
  /// The tensor of `member`: `batch[&Sample::image]`. Throws InvalidArgument when `member` is not
  /// one of S's DPIPE_FIELDS.
  template <class M>
  [[nodiscard]] const Tensor& operator[](M S::*member) const {
    return tensors_.at(index_of(member));
  }
  /// Each row's own first dimension (int64 [batch]) of a padded field. Throws InvalidArgument when
  /// the field was not padded.
  template <class M>
  [[nodiscard]] const Tensor& lengths(M S::*member) const {
    const std::size_t index = index_of(member);
    if (!lengths_.at(index).defined()) {
      DPIPE_THROW(InvalidArgument, "TensorBatch<{}>: field '{}' was not padded, so it has no lengths", type_name<S>(),
                  detail::field_name<S>(index));
    }
    return lengths_[index];
  }
  [[nodiscard]] const std::vector<Tensor>& tensors() const noexcept { return tensors_; }
  [[nodiscard]] const std::vector<Tensor>& lengths() const noexcept { return lengths_; }

  bool operator==(const TensorBatch&) const = default;

  DPIPE_FIELDS(rows_, tensors_, lengths_)

 private:
  template <class M>
  static std::size_t index_of(M S::*member) {
    const std::size_t index = detail::field_index(member);
    if (index == detail::kNoField) {
      DPIPE_THROW(InvalidArgument, "TensorBatch<{}>: the member is not one of the fields {} declares with DPIPE_FIELDS",
                  type_name<S>(), type_name<S>());
    }
    return index;
  }

  std::uint64_t rows_ = 0;
  std::vector<Tensor> tensors_;
  std::vector<Tensor> lengths_;
};

/// The collate function: `batches.collate(tensor_collate<S>())`. Thread-safety: a const value.
template <has_fields S>
class TensorCollate {
 public:
  static constexpr std::size_t kFields = TensorBatch<S>::kFields;

  /// A copy that pads `member`'s field (see the file's comment). Throws InvalidArgument when
  /// `member` is not one of S's fields.
  template <class M>
  [[nodiscard]] TensorCollate pad(M S::*member, double value) const {
    const std::size_t index = detail::field_index(member);
    if (index == detail::kNoField) {
      DPIPE_THROW(InvalidArgument, "tensor_collate<{}>: pad() of a member that is not one of the fields {} declares",
                  type_name<S>(), type_name<S>());
    }
    TensorCollate copy = *this;
    copy.pads_[index] = value;
    return copy;
  }
  /// A copy whose batches come from `allocator` (null: the collating thread's current one).
  [[nodiscard]] TensorCollate allocator(HostAllocatorPtr allocator) const {
    TensorCollate copy = *this;
    copy.allocator_ = std::move(allocator);
    return copy;
  }

  TensorBatch<S> operator()(const std::vector<S>& rows) const {
    std::vector<Tensor> tensors(kFields);
    std::vector<Tensor> lengths(kFields);
    std::vector<detail::TensorRow> views(rows.size());
    [&]<std::size_t... I>(std::index_sequence<I...>) { (stack<I>(rows, views, tensors, lengths), ...); }
    (std::make_index_sequence<kFields>{});
    return TensorBatch<S>(rows.size(), std::move(tensors), std::move(lengths));
  }

 private:
  template <std::size_t I>
  void stack(const std::vector<S>& rows, std::vector<detail::TensorRow>& views, std::vector<Tensor>& tensors,
             std::vector<Tensor>& lengths) const {
    using Field = std::remove_cvref_t<std::tuple_element_t<I, decltype(std::declval<const S&>().dpipe_fields())>>;
    static_assert(tensor_field<Field>,
                  "tensor_collate: a field is neither an arithmetic scalar, a std::array, std::span or std::vector of "
                  "them, nor a dpipe::Tensor");
    for (std::size_t row = 0; row < rows.size(); ++row) {
      views[row] = detail::TensorRowOf<Field>::view(std::get<I>(rows[row].dpipe_fields()));
    }
    detail::StackField field{type_name<S>(), detail::field_name<S>(I), pads_[I], &allocator_};
    if constexpr (std::is_same_v<Field, Tensor>) {
      field.empty_row = {DType::kUInt8, 0, {}, nullptr};  // a default Tensor has no dtype or shape
    } else {
      field.empty_row = detail::TensorRowOf<Field>::view(Field{});
    }
    tensors[I] = detail::stack_rows(views, field, &lengths[I]);
  }

  std::array<std::optional<double>, kFields> pads_{};
  HostAllocatorPtr allocator_;
};

/// The collate function for batches of S: `batches.collate(dpipe::tensor_collate<Sample>())`.
template <has_fields S>
[[nodiscard]] TensorCollate<S> tensor_collate() {
  return {};
}

}  // namespace dpipe
