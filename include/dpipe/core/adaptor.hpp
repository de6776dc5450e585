#pragma once
/// \file
/// `|` adaptors: `pipe | adaptor` builds a node that reads `pipe`. What `|` applies is a
/// PipeAdaptor, for built-in nodes (`dpipe::iter::batch(32)` returns one) and user nodes alike, so
/// both compose the same way. An Adaptor wraps `make(source, args...)`, and calling it with the
/// arguments gives the PipeAdaptor. For a node class of your own, `dpipe::iter::adaptor<Node>`, or
/// `dpipe::iter::adaptor_of<Template>` for a class template over the element type (both in
/// <dpipe/core/iter_pipe.hpp>), is the whole definition:
///
///     inline constexpr auto running_sum = dpipe::iter::adaptor<RunningSum>;
///     auto pipe = source | running_sum(/*scale=*/2.0);  // RunningSum(source, 2.0)
///
/// Thread-safety: adaptors are immutable values.

#include <concepts>
#include <utility>

namespace dpipe {

/// What calling an Adaptor gives: `pipe | adaptor` is `adaptor.fn(pipe)`.
template <class Fn>
struct PipeAdaptor {
  Fn fn;
};
template <class Fn>
PipeAdaptor(Fn) -> PipeAdaptor<Fn>;

/// Applies an adaptor to a handle (an IterPipe or a MapPipe).
template <class Handle, class Fn>
requires requires { typename Handle::node_type; } && std::invocable<const Fn&, const Handle&>
auto operator|(const Handle& pipe, const PipeAdaptor<Fn>& adaptor) { return adaptor.fn(pipe); }

/// `adaptor(args...)` is the PipeAdaptor that makes `make(source, args...)` for each source it
/// is applied to. The arguments are copied into the PipeAdaptor.
template <class Make>
struct Adaptor {
  Make make;

  template <class... Args>
  [[nodiscard]] constexpr auto operator()(Args... args) const {
    return PipeAdaptor{[make = make, ... args = std::move(args)](const auto& source) { return make(source, args...); }};
  }
};
template <class Make>
Adaptor(Make) -> Adaptor<Make>;

}  // namespace dpipe
