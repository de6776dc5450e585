#pragma once
/// \file
/// EachInput: the loop of the nodes that make one element of each input (open_files, decompress
/// and read_from_http open a stream, parse_json_files parses a whole file).

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include <dpipe/core/detail/element_skipper.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/error_policy.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::io::detail {

/// Yields what the derived node's make() makes of each input of its source (a path, a URL, a
/// stream). An input make() fails on with a DataError raises it, or with OnError::skip is logged,
/// counted in the node's statistics and passed over. Thread-safety: one iterating thread.
template <class In, class Out>
class EachInput : public IterDataPipe<Out> {
 public:
  void for_each_input(const InputVisitor& visit) override { visit(inputs_); }

  /// The inputs skipped in this epoch.
  [[nodiscard]] std::uint64_t skipped() const noexcept { return skipper_.skipped(); }

 protected:
  EachInput(std::string_view name, const IterPipe<In>& inputs, OnError on_error)
      : IterDataPipe<Out>(std::string(name)), skipper_(on_error), inputs_(inputs.ptr()) {}

  /// What `input` becomes; a DataError naming this node when it cannot.
  virtual Out make(In input) = 0;

  void reset_impl() final {
    skipper_.reset();
    inputs_.reset();
  }

  std::optional<Out> next_impl() final {
    while (auto input = inputs_.next()) {
      try {
        return make(std::move(*input));
      } catch (const DataError& error) {
        skipper_.skip_bad_data(error);
        this->count_skipped();
      }
    }
    return std::nullopt;
  }

  dpipe::detail::ElementSkipper skipper_;  // a derived node that is not stateless saves its count

 private:
  Input<In> inputs_;
};

}  // namespace dpipe::io::detail
