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
/// (MultiProcessingOptions::pin_memory), worker processes their tensor arena, which the trainer's
/// tensors then share (or else the heap, from which a batch is decoded straight into the trainer's
/// allocator). For large samples, dpipe::iter::tensor_batch (<dpipe/tensor/tensor_batch.hpp>)
/// batches and collates in one node. Thread-safety: the collate function is a const value.

#include <algorithm>
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

/// Stacks the rows of one field that is not padded into a batch tensor one row at a time: the
/// first row gives the dtype and shape of a tensor of `capacity` rows, from `field`'s allocator.
/// Thread-safety: one thread.
class RowStacker {
 public:
  /// Throws InvalidArgument as stack_rows() does for a row of too many dimensions.
  RowStacker(const StackField& field, std::size_t capacity, const TensorRow& first);
  /// Copies row `index` (`first` as 0, then the next ones in order, fewer than `capacity`) into
  /// place. Throws InvalidArgument, as stack_rows() does, for a row that differs from the first.
  void add(const TensorRow& row, std::size_t index);
  /// The tensor of the first `rows` rows added (a short batch shares the buffer of `capacity`).
  [[nodiscard]] Tensor finish(std::size_t rows);
  /// The bytes of a row.
  [[nodiscard]] std::size_t row_bytes() const noexcept { return row_bytes_; }

 private:
  const StackField* field_;
  std::size_t capacity_;
  TensorRow first_;
  Tensor batch_;
  std::size_t row_bytes_ = 0;
  bool streaming_ = false;
};

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

  /// Whether a field is padded: then a batch's shape needs all of its rows first.
  [[nodiscard]] bool pads() const noexcept {
    return std::any_of(pads_.begin(), pads_.end(), [](const auto& pad) { return pad.has_value(); });
  }

  /// Builds a batch of up to `capacity` rows one row at a time, each copied into the batch's
  /// buffers as it is added (tensor_batch()). Only for a collate that pads() no field.
  /// Thread-safety: one thread; neither copied nor moved (its stackers point into it).
  class Stacker {
   public:
    Stacker(const TensorCollate& collate, std::size_t capacity) : collate_(&collate), capacity_(capacity) {}
    Stacker(const Stacker&) = delete;
    Stacker& operator=(const Stacker&) = delete;

    /// Copies `row` in as the next row. Throws InvalidArgument as the collate does for a row that
    /// differs from the first.
    void add(const S& row) {
      [&]<std::size_t... I>(std::index_sequence<I...>) { (add_field<I>(row), ...); }
      (std::make_index_sequence<kFields>{});
      ++rows_;
    }
    /// The rows added.
    [[nodiscard]] std::size_t size() const noexcept { return rows_; }
    /// The bytes of one row, over all fields (0 before the first).
    [[nodiscard]] std::size_t row_bytes() const noexcept {
      std::size_t bytes = 0;
      for (const auto& stacker : stackers_) bytes += stacker.row_bytes();
      return bytes;
    }
    /// The batch of the rows added.
    [[nodiscard]] TensorBatch<S> finish() {
      if (rows_ == 0) return (*collate_)({});
      std::vector<Tensor> tensors;
      tensors.reserve(kFields);
      for (auto& stacker : stackers_) tensors.push_back(stacker.finish(rows_));
      return TensorBatch<S>(rows_, std::move(tensors), std::vector<Tensor>(kFields));
    }

   private:
    template <std::size_t I>
    void add_field(const S& row) {
      const detail::TensorRow view = TensorCollate::view<I>(row);
      if (rows_ == 0) {
        fields_[I] = collate_->field<I>();
        stackers_.emplace_back(fields_[I], capacity_, view);
      }
      stackers_[I].add(view, rows_);
    }

    const TensorCollate* collate_;
    std::size_t capacity_;
    std::size_t rows_ = 0;
    std::array<detail::StackField, kFields> fields_{};
    std::vector<detail::RowStacker> stackers_;  // one per field, made at the first row
  };

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
  using FieldType = std::remove_cvref_t<std::tuple_element_t<I, decltype(std::declval<const S&>().dpipe_fields())>>;

  /// Field I of `row` as a row of its batch tensor.
  template <std::size_t I>
  static detail::TensorRow view(const S& row) {
    static_assert(tensor_field<FieldType<I>>,
                  "tensor_collate: a field is neither an arithmetic scalar, a std::array, std::span or std::vector of "
                  "them, nor a dpipe::Tensor");
    return detail::TensorRowOf<FieldType<I>>::view(std::get<I>(row.dpipe_fields()));
  }

  /// What stacking field I needs besides its rows.
  template <std::size_t I>
  [[nodiscard]] detail::StackField field() const {
    detail::StackField field{type_name<S>(), detail::field_name<S>(I), pads_[I], &allocator_};
    if constexpr (std::is_same_v<FieldType<I>, Tensor>) {
      field.empty_row = {DType::kUInt8, 0, {}, nullptr};  // a default Tensor has no dtype or shape
    } else {
      field.empty_row = detail::TensorRowOf<FieldType<I>>::view(FieldType<I>{});
    }
    return field;
  }

  template <std::size_t I>
  void stack(const std::vector<S>& rows, std::vector<detail::TensorRow>& views, std::vector<Tensor>& tensors,
             std::vector<Tensor>& lengths) const {
    for (std::size_t row = 0; row < rows.size(); ++row) views[row] = view<I>(rows[row]);
    tensors[I] = detail::stack_rows(views, field<I>(), &lengths[I]);
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
