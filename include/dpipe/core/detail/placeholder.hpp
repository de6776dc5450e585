#pragma once
/// \file
/// Placeholder<T>: what ops::Placeholder makes, a node that stands in for another during graph
/// surgery and throws when iterated; its length is the one set_stand_in_length() gave it.

#include <optional>
#include <string>
#include <string_view>

#include <dpipe/core/detail/iter_datapipe_classes.hpp>
#include <dpipe/core/error.hpp>

namespace dpipe::detail {

template <class T>
class Placeholder final : public IterDataPipe<T>, public PlaceholderTag {
 public:
  static constexpr std::string_view kName = "placeholder";

  Placeholder() : IterDataPipe<T>(std::string(kName)) {}
  void for_each_input(const InputVisitor& /*visit*/) override {}
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Placeholder>(*this); }

 protected:
  std::optional<T> next_impl() override {
    DPIPE_THROW(UsageError, "{} stands in for a dispatched branch and cannot be iterated", this->label());
  }
  [[nodiscard]] std::optional<std::size_t> length_impl() const override { return stand_in_length_; }
};

}  // namespace dpipe::detail
