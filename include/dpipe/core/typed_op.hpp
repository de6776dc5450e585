#pragma once
/// \file
/// Typed operations: the one way code that holds only a DataPipePtr (a reading service, an
/// adapter, graph surgery) runs an operation that needs the node's static type, such as
/// appending a prefetch to a graph's root, encoding a node's elements for another process, or
/// turning a map node into a threadpool_map.
///
/// An operation is a tag type naming a function type whose first parameter is the node:
///
///     struct AppendPrefetch {
///       using Function = DataPipePtr(const DataPipePtr& node, std::size_t buffer_size);
///       static constexpr std::string_view kOperation = "prefetch";
///     };
///
/// Implementations are registered, where the types are known, for a key: a node class (for an
/// operation of that node, such as ToThreadPoolMap of a map node) or an element type (for an
/// operation any node of that element type supports). Nodes register the operations of their own
/// element type when they are built; DataLoader2<T> registers the ones its reading services and
/// adapters apply to its root. find_typed_op looks for the node's class first, then its element
/// type. New wings add operations without editing any class.
///
/// Thread-safety: registering and finding may happen from any thread.

#include <string_view>
#include <typeindex>
#include <utility>

#include <dpipe/core/datapipe.hpp>

namespace dpipe {
namespace detail {
using ErasedFunction = void (*)();
void register_typed_op(std::type_index op, std::type_index key, ErasedFunction function);
[[nodiscard]] ErasedFunction find_typed_op(std::type_index op, const DataPipe& node);
[[noreturn]] void throw_missing_typed_op(std::string_view op, const DataPipe& node);
}  // namespace detail

/// Registers `function` as the implementation of `Op` for nodes of class `key`, or of element
/// type `key`. A later registration for the same key replaces the earlier one.
template <class Op>
void register_typed_op(std::type_index key, typename Op::Function* function) {
  detail::register_typed_op(typeid(Op), key, reinterpret_cast<detail::ErasedFunction>(function));
}

/// Registers `Function` for `Key` once per process, however often it is called.
template <class Op, class Key, typename Op::Function* Function>
void register_typed_op_once() {
  static const bool registered = (register_typed_op<Op>(typeid(Key), Function), true);
  (void)registered;
}

/// The implementation of `Op` for `node` (its class first, then its element type), or nullptr.
template <class Op>
[[nodiscard]] typename Op::Function* find_typed_op(const DataPipe& node) {
  return reinterpret_cast<typename Op::Function*>(detail::find_typed_op(typeid(Op), node));
}

namespace detail {
template <class Op, class Function = typename Op::Function>
struct TypedOpInvoker;
template <class Op, class Result, class... Params>
struct TypedOpInvoker<Op, Result(const DataPipePtr&, Params...)> {
  static Result apply(const DataPipePtr& node, Params... params) {
    auto* function = find_typed_op<Op>(*node);
    if (function == nullptr) throw_missing_typed_op(Op::kOperation, *node);
    return function(node, std::forward<Params>(params)...);
  }
};
}  // namespace detail

/// Runs `Op` on `node`: `apply_typed_op<ops::AppendPrefetch>(root, 10)`. Throws NotSupportedError
/// naming the operation, the node and its element type when nothing registered it.
template <class Op>
inline constexpr auto apply_typed_op = &detail::TypedOpInvoker<Op>::apply;

}  // namespace dpipe
