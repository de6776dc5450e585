// The core model: handles as ranges, both composition forms, the single-iterator rule, user
// nodes, checked input replacement, concepts.

#include <numeric>
#include <ranges>
#include <string>
#include <string_view>
#include <typeinfo>
#include <vector>

#include <catch2/catch.hpp>
#include <range/v3/range/conversion.hpp>
#include <range/v3/view/iota.hpp>
#include <range/v3/view/take.hpp>
#include <range/v3/view/transform.hpp>
#include <spdlog/logger.h>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"

namespace {

using dpipe::IterPipe;
using dpipe::testing::collect;
namespace iter = dpipe::iter;

/// A user node: yields each element twice. About fifteen lines, like examples/custom_node.cpp.
class Twice final : public dpipe::IterDataPipe<int> {
 public:
  explicit Twice(const IterPipe<int>& source) : IterDataPipe("twice"), source_(source.ptr()) {}
  void for_each_input(const dpipe::InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] dpipe::DataPipePtr clone_self() const override { return std::make_shared<Twice>(*this); }

 protected:
  void reset_impl() override {
    pending_.reset();
    source_.reset();
  }
  std::optional<int> next_impl() override {
    if (pending_) return std::exchange(pending_, std::nullopt);
    pending_ = source_.next();
    return pending_;
  }

 private:
  dpipe::Input<int> source_;
  std::optional<int> pending_;
};

TEST_CASE("IterPipe: is an input range and a view", "[core][handle]") {
  static_assert(std::ranges::input_range<IterPipe<int>>);
  static_assert(std::ranges::view<IterPipe<int>>);
  static_assert(ranges::input_range<IterPipe<int>>);
  static_assert(std::input_iterator<IterPipe<int>::iterator>);
  static_assert(std::same_as<std::ranges::range_reference_t<IterPipe<std::string>>, std::string&>);
}

TEST_CASE("IterPipe: composes with std and range-v3 views", "[core][handle]") {
  auto pipe = iter::from(ranges::views::iota(0, 6)).map([](int x) { return x * x; });
  std::vector<int> doubled;
  for (int x : pipe | std::views::transform([](int x) { return x + 1; }) | std::views::take(4)) doubled.push_back(x);
  CHECK(doubled == std::vector<int>{1, 2, 5, 10});
  const auto via_range_v3 = pipe | ranges::views::take(3) | ranges::to<std::vector>();
  CHECK(via_range_v3 == std::vector<int>{0, 1, 4});
}

TEST_CASE("IterPipe: method chaining and | adaptors build the same pipeline", "[core][compose]") {
  const std::vector<int> data{1, 2, 3, 4, 5, 6, 7, 8, 9, 10};
  auto chained = iter::from(data).map([](int x) { return x + 1; }).filter([](int x) { return x % 2 == 0; }).batch(2);
  auto piped = iter::from(data) | iter::map([](int x) { return x + 1; }) |
               iter::filter([](int x) { return x % 2 == 0; }) | iter::batch(2);
  const std::vector<std::vector<int>> expected{{2, 4}, {6, 8}, {10}};
  CHECK(collect(chained) == expected);
  CHECK(collect(piped) == expected);
}

TEST_CASE("IterPipe: user nodes subclass IterDataPipe and join | chains", "[core][custom]") {
  auto chained = dpipe::make_iter<Twice>(iter::from({1, 2, 3}));
  auto piped = iter::from({1, 2, 3}) | iter::make<Twice>() | iter::map([](int x) { return x * 10; });
  CHECK(collect(chained) == std::vector<int>{1, 1, 2, 2, 3, 3});
  CHECK(collect(piped) == std::vector<int>{10, 10, 20, 20, 30, 30});
  CHECK(collect(piped) == std::vector<int>{10, 10, 20, 20, 30, 30});  // a second iteration starts over
  CHECK(chained.node().name() == "twice");
  CHECK(chained.node().element_type() == "int");
}

/// A user node template: pairs each element of any element type with its number, from `first`.
template <class T>
class Numbered final : public dpipe::IterDataPipe<std::pair<int, T>> {
 public:
  Numbered(const IterPipe<T>& source, int first)
      : dpipe::IterDataPipe<std::pair<int, T>>("numbered"), source_(source.ptr()), first_(first) {}
  void for_each_input(const dpipe::InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] dpipe::DataPipePtr clone_self() const override { return std::make_shared<Numbered>(*this); }

 protected:
  void reset_impl() override {
    next_number_ = first_;
    source_.reset();
  }
  std::optional<std::pair<int, T>> next_impl() override {
    auto element = source_.next();
    if (!element) return std::nullopt;
    return std::pair<int, T>(next_number_++, std::move(*element));
  }

 private:
  dpipe::Input<T> source_;
  int first_;
  int next_number_ = 0;
};

/// A user map node: key k holds the source's value at k plus `offset`.
class Offset final : public dpipe::MapDataPipe<std::size_t, int> {
 public:
  Offset(const dpipe::MapPipe<std::size_t, int>& source, int offset)
      : MapDataPipe("offset"), source_(source.ptr()), offset_(offset) {}
  void for_each_input(const dpipe::InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] dpipe::DataPipePtr clone_self() const override { return std::make_shared<Offset>(*this); }

 protected:
  int get_impl(const std::size_t& key) override { return source_.get(key) + offset_; }
  [[nodiscard]] std::size_t size_impl() const override { return source_.size(); }

 private:
  dpipe::MapInput<std::size_t, int> source_;
  int offset_;
};

/// The | adaptors of the user nodes, defined as a user would.
inline constexpr auto twice = iter::adaptor<Twice>;
inline constexpr auto numbered = iter::adaptor_of<Numbered>;

TEST_CASE("IterPipe: a user node's adaptor / a node template's adaptor compose like built-in ones", "[core][custom]") {
  auto ints = iter::from({1, 2}) | twice() | numbered(10) | iter::batch(3);
  using IntBatch = std::vector<std::pair<int, int>>;
  CHECK(collect(ints) == std::vector<IntBatch>{{{10, 1}, {11, 1}, {12, 2}}, {{13, 2}}});
  auto words = iter::from(std::vector<std::string>{"a", "b"}) | numbered(0);
  static_assert(std::same_as<decltype(words), IterPipe<std::pair<int, std::string>>>);
  CHECK(collect(words) == std::vector<std::pair<int, std::string>>{{0, "a"}, {1, "b"}});
  CHECK(words.node().name() == "numbered");
}

TEST_CASE("MapPipe: a user map node's adaptor composes like built-in ones", "[core][custom]") {
  auto squares = dpipe::map::from(std::vector<int>{0, 1, 2, 3}) | dpipe::map::adaptor<Offset>(10);
  CHECK(squares.get(2) == 12);
  CHECK(squares.size() == 4);
  CHECK(collect(squares.to_iter()) == std::vector<int>{10, 11, 12, 13});
}

TEST_CASE("IterPipe: elements can be moved out of the loop variable", "[core][handle]") {
  auto pipe = iter::from(std::vector<std::string>{"alpha", "beta"});
  std::vector<std::string> taken;
  for (auto& element : pipe) taken.push_back(std::move(element));
  CHECK(taken == std::vector<std::string>{"alpha", "beta"});
  CHECK(collect(pipe) == std::vector<std::string>{"alpha", "beta"});  // the source keeps its own copy
}

TEST_CASE("IterPipe: a new iterator invalidates the previous one", "[core][iterator]") {
  auto pipe = iter::from({0, 1, 2, 3, 4});
  auto first = pipe.begin();
  CHECK(*first == 0);
  ++first;
  auto second = pipe.begin();
  CHECK(*second == 0);
  const auto node_label = pipe.node().label();
  const std::string message =
      "This iterator has been invalidated because another iterator has been created from the same "
      "IterDataPipe: " +
      node_label +
      "\nThis may be caused multiple references to the same IterDataPipe. We recommend using `.fork()` "
      "if that is necessary.\nFor feedback regarding this single iterator per IterDataPipe constraint, "
      "feel free to comment on this issue: https://github.com/pytorch/data/issues/45.";
  CHECK_THROWS_MATCHES(++first, dpipe::UsageError, Catch::Message(message));
  CHECK_THROWS_MATCHES(*first, dpipe::UsageError, Catch::Message(message));
  ++second;
  CHECK(*second == 1);
}

TEST_CASE("IterPipe: a node read by two consumers without fork is an error", "[core][iterator]") {
  auto shared = iter::from({1, 2, 3});
  auto zipped = shared.map([](int x) { return x; }).zip(shared.map([](int x) { return x * 2; }));
  CHECK_THROWS_WITH(collect(zipped), Catch::StartsWith("This iterator has been invalidated because another iterator "
                                                       "has been created from the same IterDataPipe: " +
                                                       shared.node().label()));
}

TEST_CASE("DataPipe: ids / names / labels and inputs", "[core][datapipe]") {
  auto source = iter::from({1, 2});
  auto mapped = source.map([](int x) { return std::to_string(x); });
  CHECK(mapped.node().id() != source.node().id());
  CHECK(mapped.node().name() == "map");
  CHECK(mapped.node().label() == "map#" + std::to_string(mapped.node().id()));
  CHECK(mapped.node().element_type() == "std::string");
  CHECK(mapped.node().kind() == dpipe::PipeKind::kIter);
  REQUIRE(mapped.node().inputs().size() == 1);
  CHECK(mapped.node().inputs().front() == source.ptr());
  CHECK(source.node().inputs().empty());
  CHECK(mapped.node().is_replicable());
  mapped.node().set_replicable(false);
  CHECK_FALSE(mapped.node().is_replicable());
}

/// A source node with a name of the test's choosing.
class Named final : public dpipe::IterDataPipe<int> {
 public:
  explicit Named(std::string name) : IterDataPipe(std::move(name)) {}
  void for_each_input(const dpipe::InputVisitor& /*visit*/) override {}
  [[nodiscard]] dpipe::DataPipePtr clone_self() const override { return std::make_shared<Named>(*this); }

 protected:
  std::optional<int> next_impl() override { return std::nullopt; }
};

TEST_CASE("DataPipe: a name with ':' or '/' / an empty name is refused", "[core][datapipe]") {
  for (const std::string name : {"ns::Tok", "a/b", ""}) {
    CHECK_THROWS_MATCHES(Named(name), dpipe::InvalidArgument,
                         Catch::Message("a node name must be non-empty and contain neither ':' nor '/' (they "
                                        "separate the keys of a checkpoint), got \"" +
                                        name + "\""));
  }
  CHECK(Named("tokens_v2").name() == "tokens_v2");
}

TEST_CASE("DataPipe: replace_input checks the element type and names both types", "[core][datapipe]") {
  auto source = iter::from({1, 2, 3});
  auto batched = source.batch(2);
  auto other_ints = iter::from({7, 8, 9});
  CHECK(batched.node().replace_input(source.node(), other_ints.ptr()) == 1);
  CHECK(collect(batched) == std::vector<std::vector<int>>{{7, 8}, {9}});

  auto strings = iter::from(std::vector<std::string>{"x"});
  const std::string message = "cannot replace input " + other_ints.node().label() + " of " + batched.node().label() +
                              ": the edge reads an iter pipe of int, but " + strings.node().label() +
                              " is an iter pipe of std::string";
  CHECK_THROWS_MATCHES(batched.node().replace_input(other_ints.node(), strings.ptr()), dpipe::InvalidArgument,
                       Catch::Message(message));
  CHECK(collect(batched) == std::vector<std::vector<int>>{{7, 8}, {9}});       // unchanged
  CHECK(batched.node().replace_input(strings.node(), other_ints.ptr()) == 0);  // not an input
}

TEST_CASE("DataPipe: a user node without checkpoint support says so", "[core][state]") {
  auto pipe = dpipe::make_iter<Twice>(iter::from({1}));
  const std::string message = pipe.node().label() +
                              " (int) does not support checkpoints: override save_state and load_state to "
                              "checkpoint this pipeline (or stateless() if it keeps no iteration state)";
  CHECK_THROWS_MATCHES(dpipe::graph::save_state(pipe), dpipe::StateError, Catch::Message(message));
}

/// A user node that keeps no iteration state and says so.
class Negate final : public dpipe::IterDataPipe<int> {
 public:
  explicit Negate(const IterPipe<int>& source) : IterDataPipe("negate"), source_(source.ptr()) {}
  void for_each_input(const dpipe::InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] dpipe::DataPipePtr clone_self() const override { return std::make_shared<Negate>(*this); }
  [[nodiscard]] bool stateless() const noexcept override { return true; }

 protected:
  std::optional<int> next_impl() override {
    auto value = source_.next();
    if (!value) return std::nullopt;
    return -*value;
  }

 private:
  dpipe::Input<int> source_;
};

TEST_CASE("DataPipe: a stateless user node checkpoints with nothing to save / and may be added later",
          "[core][state]") {
  auto pipe = dpipe::make_iter<Negate>(iter::from({1, 2, 3, 4}).shuffle(2));
  const auto seed = [&] {
    dynamic_cast<dpipe::RandomDataPipe&>(*dpipe::graph::find_dps(dpipe::graph::traverse_dps(pipe), "shuffle")[0])
        .set_seed(3);
  };
  seed();
  const auto expected = dpipe::testing::collect(pipe);
  seed();
  (void)dpipe::testing::take(pipe, 1);
  const auto blob = dpipe::graph::save_state(pipe);
  auto without = iter::from({1, 2, 3, 4}).shuffle(2);
  dpipe::graph::load_state(without, blob);
  std::vector<int> rest;
  for (int x : without) rest.push_back(-x);
  CHECK(rest == std::vector<int>(expected.begin() + 1, expected.end()));
}

template <class Pipe, class F>
concept can_map = requires(const Pipe& pipe, F fn) {
  pipe.map(fn);
};
template <class Pipe, class F>
concept can_filter = requires(const Pipe& pipe, F fn) {
  pipe.filter(fn);
};
template <class Pipe, class F>
concept can_flatmap = requires(const Pipe& pipe, F fn) {
  pipe.flatmap(fn);
};
template <class Pipe>
concept can_unbatch = requires(const Pipe& pipe) {
  pipe.unbatch();
};

// Callables that do not fit the element type are rejected at compile time.
using Ints = IterPipe<int>;
static_assert(can_map<Ints, int (*)(int)>);
static_assert(can_map<Ints, std::string (*)(const int&)>);
static_assert(!can_map<Ints, int (*)(std::string)>);  // not invocable on int
static_assert(!can_map<Ints, void (*)(int)>);         // returns nothing
static_assert(!can_map<Ints, int (*)(int&)>);         // elements are passed as rvalues
static_assert(can_filter<Ints, bool (*)(const int&)>);
static_assert(!can_filter<Ints, std::string (*)(int)>);
static_assert(can_flatmap<Ints, std::vector<int> (*)(int)>);
static_assert(!can_flatmap<Ints, int (*)(int)>);  // not a range
static_assert(can_unbatch<IterPipe<std::vector<int>>>);
static_assert(!can_unbatch<Ints>);
static_assert(dpipe::map_fn<int (*)(int), int>);
static_assert(!dpipe::filter_fn<int (*)(std::string), int>);

TEST_CASE("IterPipe: an empty handle is a clear error", "[core][handle]") {
  IterPipe<int> empty;
  CHECK_FALSE(static_cast<bool>(empty));
  CHECK_THROWS_MATCHES(empty.node(), dpipe::UsageError, Catch::Message("IterPipe<int>: the handle is empty"));
  CHECK_THROWS_MATCHES(empty.map([](int x) { return x; }), dpipe::InvalidArgument,
                       Catch::Message("an input pipe of int is empty (a default-constructed handle)"));
}

TEST_CASE("type_name: readable names", "[core][type_name]") {
  CHECK(dpipe::type_name<int>() == "int");
  CHECK(dpipe::type_name<std::string>() == "std::string");
  CHECK(dpipe::type_name<std::vector<std::string>>() == "std::vector<std::string>");
  CHECK(dpipe::type_name<std::vector<std::vector<int>>>() == "std::vector<std::vector<int>>");
  CHECK(dpipe::type_name<std::string_view>() == "std::string_view");
  // A node of a type libdpipe compiles names it as a node compiled here would.
  CHECK(dpipe::iter::from(std::vector<int>{1, 2}).batch(2).node().element_type() == "std::vector<int>");
  CHECK(dpipe::detail::demangle(typeid(std::vector<std::string>).name()) == "std::vector<std::string>");
}

TEST_CASE("type_name: the spellings compilers use become the one users write", "[core][type_name]") {
  using dpipe::detail::tidy_type_name;
  const std::string strings =
      "std::vector<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> >, "
      "std::allocator<std::__cxx11::basic_string<char, std::char_traits<char>, std::allocator<char> > > >";
  CHECK(tidy_type_name(strings) == "std::vector<std::string>");
  CHECK(tidy_type_name("std::vector<int, std::allocator<int> >") == "std::vector<int>");
  CHECK(tidy_type_name("std::vector<std::vector<int, std::allocator<int> >, std::allocator<std::vector<int, "
                       "std::allocator<int> > > >") == "std::vector<std::vector<int>>");
  CHECK(tidy_type_name("std::map<int, std::vector<int, std::allocator<int> >, std::less<int>, "
                       "std::allocator<std::pair<const int, std::vector<int, std::allocator<int> > > > >") ==
        "std::map<int, std::vector<int>>");
  CHECK(tidy_type_name("std::unordered_map<std::__cxx11::basic_string<char>, int, std::hash<std::__cxx11::basic_string<"
                       "char> >, std::equal_to<std::__cxx11::basic_string<char> >, std::allocator<std::pair<const "
                       "std::__cxx11::basic_string<char>, int> > >") == "std::unordered_map<std::string, int>");
  CHECK(tidy_type_name("std::unique_ptr<float, std::default_delete<float> >") == "std::unique_ptr<float>");
  CHECK(tidy_type_name("std::optional<std::vector<std::vector<long int> > >") ==
        "std::optional<std::vector<std::vector<long int>>>");
  CHECK(tidy_type_name("Weird<int, std::allocator<") == "Weird<int, std::allocator<");  // unbalanced: kept
  for (const std::string& name : {strings, std::string("std::vector<int, std::allocator<int> >")}) {
    CHECK(tidy_type_name(tidy_type_name(name)) == tidy_type_name(name));
  }
}

}  // namespace

namespace {

TEST_CASE("DataPipe: tags are kept by clones and let services find nodes", "[core][datapipe]") {
  auto pipe = iter::from({1, 2, 3}).map([](int x) { return x * 2; }).tag("expensive").batch(2);
  auto copy = dpipe::graph::clone(pipe);
  const auto tagged = [](const auto& root) {
    std::vector<std::string> tags;
    for (const auto& node : dpipe::graph::list_dps(dpipe::graph::traverse_dps(root))) tags.push_back(node->tag());
    return tags;
  };
  CHECK(tagged(pipe) == std::vector<std::string>{"", "expensive", ""});
  CHECK(tagged(copy) == std::vector<std::string>{"", "expensive", ""});
  const auto paths = [](const auto& root) {
    std::vector<std::string> result;
    for (const auto& entry : dpipe::graph::node_paths(root.ptr())) result.push_back(entry.path);
    return result;
  };
  CHECK(paths(pipe) == paths(iter::from({1}).map([](int x) { return x; }).batch(2)));
  CHECK(paths(pipe) == std::vector<std::string>{"batch", "batch/map", "batch/map/from"});
}

TEST_CASE("typed ops: a map node becomes a threadpool_map with the same function", "[core][typed_op][concurrency]") {
  auto source = iter::from({1, 2, 3, 4});
  auto mapped = source.map([](int x) { return x * 10; }).tag("t");
  const dpipe::DataPipePtr node = mapped.ptr();
  REQUIRE(dpipe::find_typed_op<dpipe::ops::ToThreadPoolMap>(*node) != nullptr);
  auto parallel = dpipe::graph::as_iter<int>(dpipe::apply_typed_op<dpipe::ops::ToThreadPoolMap>(node, 2, 4));
  CHECK(parallel.node().name() == "threadpool_map");
  CHECK(parallel.node().tag() == "t");
  CHECK(parallel.node().inputs()[0] == source.ptr());
  CHECK(dpipe::testing::collect(parallel) == std::vector<int>{10, 20, 30, 40});
}

TEST_CASE("typed ops: an operation nothing registered is a clear error", "[core][typed_op]") {
  auto filtered = iter::from({1, 2, 3}).filter([](int x) { return x > 1; });
  const dpipe::DataPipePtr node = filtered.ptr();
  CHECK(dpipe::find_typed_op<dpipe::ops::ToThreadPoolMap>(*node) == nullptr);
  CHECK_THROWS_MATCHES(dpipe::apply_typed_op<dpipe::ops::ToThreadPoolMap>(node, 2, 4), dpipe::NotSupportedError,
                       Catch::Message(fmt::format("`to_threadpool_map` is not available for {} (int): nothing "
                                                  "registered it for this node or element type (see "
                                                  "dpipe/core/typed_op.hpp)",
                                                  node->label())));
}

/// An operation of the test's own, registered for one element type.
struct Describe {
  using Function = std::string(const dpipe::DataPipePtr& node, int suffix);
  static constexpr std::string_view kOperation = "describe";
};

TEST_CASE("typed ops: element-type operations apply to every node of that type and node-class ones win",
          "[core][typed_op]") {
  dpipe::register_typed_op<Describe>(typeid(int), [](const dpipe::DataPipePtr& node, int suffix) {
    return std::string(node->name()) + " of int " + std::to_string(suffix);
  });
  auto source = iter::from({1, 2});
  auto batched = source.batch(2);
  CHECK(dpipe::apply_typed_op<Describe>(source.ptr(), 7) == "from of int 7");
  CHECK(dpipe::apply_typed_op<Describe>(source.shuffle().ptr(), 8) == "shuffle of int 8");
  CHECK(dpipe::find_typed_op<Describe>(batched.node()) == nullptr);  // std::vector<int>
  dpipe::register_typed_op<Describe>(typeid(source.node()),
                                     [](const dpipe::DataPipePtr&, int) { return std::string("the source class"); });
  CHECK(dpipe::apply_typed_op<Describe>(source.ptr(), 1) == "the source class");
  CHECK(dpipe::apply_typed_op<Describe>(source.shuffle().ptr(), 2) == "shuffle of int 2");
}

TEST_CASE("typed ops: every iter node has a placeholder and an encoder when its type has a Serializer",
          "[core][typed_op]") {
  struct Opaque {
    std::unique_ptr<int> value;
  };
  auto ints = iter::from({1, 2});
  auto opaque = ints.map([](int x) { return Opaque{std::make_unique<int>(x)}; });
  const auto placeholder = dpipe::apply_typed_op<dpipe::ops::Placeholder>(opaque.ptr());
  CHECK(placeholder->name() == "placeholder");
  CHECK(placeholder->element_type() == opaque.node().element_type());
  CHECK(dpipe::find_typed_op<dpipe::ops::Encode>(ints.node()) != nullptr);
  CHECK(dpipe::find_typed_op<dpipe::ops::Decode>(ints.node()) != nullptr);
  CHECK(dpipe::find_typed_op<dpipe::ops::Encode>(opaque.node()) == nullptr);
  CHECK(dpipe::find_typed_op<dpipe::ops::Decode>(opaque.node()) == nullptr);
}

TEST_CASE("typed ops: a map node never takes the operations of iter nodes of its key-value pairs", "[core][typed_op]") {
  auto pairs = iter::from(std::vector<std::pair<std::size_t, int>>{{0, 1}});  // registers Placeholder for the pair
  CHECK(dpipe::find_typed_op<dpipe::ops::Placeholder>(pairs.node()) != nullptr);
  const dpipe::DataPipePtr map_node = dpipe::map::from(std::vector<int>{1, 2}).ptr();
  CHECK(dpipe::find_typed_op<dpipe::ops::Placeholder>(*map_node) == nullptr);
  CHECK_THROWS_AS(dpipe::apply_typed_op<dpipe::ops::Placeholder>(map_node), dpipe::NotSupportedError);
}

TEST_CASE("Logging: DPIPE_LOG_LEVEL names spdlog's levels", "[core][logging]") {
  using dpipe::detail::parse_log_level;
  CHECK(parse_log_level("trace") == 0);
  CHECK(parse_log_level("debug") == 1);
  CHECK(parse_log_level("info") == 2);
  CHECK(parse_log_level("warn") == 3);
  CHECK(parse_log_level("error") == 4);
  CHECK(parse_log_level("critical") == 5);
  CHECK(parse_log_level("off") == 6);
  CHECK(parse_log_level("verbose") == std::nullopt);
  CHECK(parse_log_level("") == std::nullopt);
  CHECK(dpipe::logger()->name() == "dpipe");
}

}  // namespace

namespace {

TEST_CASE("IterPipe: dereferencing at the end is an error and not undefined behaviour", "[core][iterator]") {
  auto empty = iter::from(std::vector<int>{});
  auto it = empty.begin();
  CHECK(it == empty.end());
  CHECK_THROWS_MATCHES(*it, dpipe::UsageError, Catch::Message("dereferencing an iterator at the end of its iteration"));
}

}  // namespace
