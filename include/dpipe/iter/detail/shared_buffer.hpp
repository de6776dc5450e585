#pragma once
/// \file
/// The hidden container behind fork / demux / unzip / round_robin_demux children, and the child
/// nodes themselves. The container implements torchdata's child generation rules: starting a
/// child that already iterated in the current generation restarts the container (with a warning
/// if other children had not finished) and invalidates every other child's iteration; a child
/// that has not started in the current generation joins it.

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/detail/checks.hpp>
#include <dpipe/core/detail/functional.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>

namespace dpipe::detail {

/// Base of the containers. Thread-safety: one thread iterates all children of a container.
class SharedBuffer : public DataPipe {
 public:
  [[nodiscard]] PipeKind kind() const noexcept final { return PipeKind::kSharedBuffer; }
  [[nodiscard]] std::size_t num_children() const noexcept { return child_generation_.size(); }

  /// Child `child` starts an iteration.
  void start_child(std::size_t child);
  /// Throws UsageError when child `child`'s iteration was invalidated by a sibling's restart.
  void check_child(std::size_t child) const;

 protected:
  SharedBuffer(std::string name, std::size_t num_children);
  SharedBuffer(const SharedBuffer&) = default;

  /// Drops everything buffered and starts a new iteration of the source.
  virtual void restart() = 0;
  /// Whether every child has read everything it will get.
  [[nodiscard]] virtual bool all_exhausted() const = 0;

  /// Saves / restores which children are in the current generation.
  void save_generations(StateWriter& writer) const;
  void load_generations(const StateReader& reader);

 private:
  std::uint64_t generation_ = 0;  // 0: no child has ever started
  std::vector<std::uint64_t> child_generation_;
};

/// A child's edge to its container: starting it runs the container's generation rules.
template <class Container>
class ChildInput final : public InputSlot {
 public:
  ChildInput(std::shared_ptr<Container> container, std::size_t child)
      : container_(std::move(container)), child_(child) {}

  Container* operator->() const noexcept { return container_.get(); }
  [[nodiscard]] std::size_t child() const noexcept { return child_; }

  [[nodiscard]] DataPipePtr target() const override { return container_; }
  [[nodiscard]] bool try_assign(const DataPipePtr& replacement) override {
    auto typed = std::dynamic_pointer_cast<Container>(replacement);
    if (!typed) return false;
    container_ = std::move(typed);
    return true;
  }
  [[nodiscard]] std::string expected_type() const override {
    return "the shared buffer of a " + std::string(container_->name()) + " of " + container_->element_type();
  }
  void reset() override { container_->start_child(child_); }
  void rebind() noexcept override {}

 private:
  std::shared_ptr<Container> container_;
  std::size_t child_;
};

/// Child `child` of a container: yields project(container->next_for(child)). Its state lives in
/// the container.
template <class E, class Container, class Project = Identity>
class ChildPipe final : public IterDataPipe<E> {
 public:
  /// A child is named after its container: "fork_child", "demux_child", ...
  static constexpr std::string_view kNameSuffix = "_child";

  ChildPipe(std::shared_ptr<Container> container, std::size_t child, Project project = {})
      : IterDataPipe<E>(std::string(container->name()) + std::string(kNameSuffix)),
        container_(std::move(container), child),
        project_(std::move(project)) {}

  void for_each_input(const InputVisitor& visit) override { visit(container_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<ChildPipe>(*this); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }
  [[nodiscard]] std::size_t child() const noexcept { return container_.child(); }

 protected:
  std::optional<E> next_impl() override {
    auto element = container_->next_for(container_.child());
    if (!element) return std::nullopt;
    return std::optional<E>(std::in_place, project_(std::move(*element)));
  }
  [[nodiscard]] std::optional<std::size_t> length_impl() const override {
    return container_->child_length(container_.child());
  }
  [[nodiscard]] std::string no_length_reason() const override {
    if constexpr (requires(const Container& container) { container.child_no_length_reason(); }) {
      return container_->child_no_length_reason();
    } else {
      return IterDataPipe<E>::no_length_reason();
    }
  }

 private:
  ChildInput<Container> container_;
  Project project_;
};

/// Handles to children 0..n-1 of `container`; child i reads project(i) of each element.
template <class E, class Container, class MakeProject>
std::vector<IterPipe<E>> make_children(const std::shared_ptr<Container>& container, MakeProject make_project) {
  std::vector<IterPipe<E>> children;
  for (std::size_t i = 0; i < container->num_children(); ++i) {
    using Project = decltype(make_project(i));
    children.emplace_back(std::make_shared<ChildPipe<E, Container, Project>>(container, i, make_project(i)));
  }
  return children;
}

/// Handles to children 0..n-1 of `container`, each reading whole elements.
template <class E, class Container>
std::vector<IterPipe<E>> make_children(const std::shared_ptr<Container>& container) {
  return make_children<E>(container, [](std::size_t) { return Identity{}; });
}

}  // namespace dpipe::detail
