// Graph functions on torchdata's test fixture (test_graph.py, reference T37-T40), clone, to_dot,
// seeding and shuffle settings.

#include <numeric>
#include <set>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/graph_text.hpp"

namespace {

namespace iter = dpipe::iter;
namespace graph = dpipe::graph;
using dpipe::DataPipePtr;
using dpipe::IterPipe;
using dpipe::testing::collect;
using dpipe::testing::GraphNames;

using dpipe::testing::range;

/// An identity wrapper (the fixture's Adaptor).
template <class T>
class Adaptor final : public dpipe::IterDataPipe<T> {
 public:
  explicit Adaptor(const IterPipe<T>& source) : dpipe::IterDataPipe<T>("adaptor"), source_(source.ptr()) {}
  void for_each_input(const dpipe::InputVisitor& visit) override { visit(source_); }
  [[nodiscard]] DataPipePtr clone_self() const override { return std::make_shared<Adaptor>(*this); }

 protected:
  std::optional<T> next_impl() override { return source_.next(); }

 private:
  dpipe::Input<T> source_;
};

/// torchdata's fixture: src -> m1 -> ub -> demux(c1, c2); m2 = c1.map; dp = m2.zip(c2).
struct Fixture {
  IterPipe<int> src = iter::from(range(20));
  IterPipe<std::vector<int>> m1 = src.map([](int x) { return std::vector<int>{x, x + 5}; });
  IterPipe<int> ub = m1.unbatch();
  std::vector<IterPipe<int>> children = ub.demux(2, [](const int& x) { return x % 2; });
  IterPipe<int> c1 = children[0];
  IterPipe<int> c2 = children[1];
  DataPipePtr dm = c1.node().inputs()[0];
  IterPipe<int> m2 = c1.map([](int x) { return x * 2; });
  IterPipe<std::tuple<int, int>> dp = m2.zip(c2);
  GraphNames names = GraphNames()
                         .add("src", src)
                         .add("m1", m1)
                         .add("ub", ub)
                         .add("c1", c1)
                         .add("c2", c2)
                         .add("dm", dm)
                         .add("m2", m2)
                         .add("dp", dp);
};

TEST_CASE("traverse_dps: the tree expansion of the DAG", "[graph][traverse]") {
  Fixture f;
  const auto g = graph::traverse_dps(f.dp);
  CHECK(f.names.text(g) == "dp(m2(c1(dm(ub(m1(src))))),c2(dm(ub(m1(src)))))");
  CHECK(g.root() == f.dp.ptr());
  CHECK(g.find(f.dp.node().id()) != nullptr);
  CHECK(g.find(f.src.node().id()) == nullptr);  // only the top level
}

TEST_CASE("find_dps: by name and by type / depth-first / each node once (T37)", "[graph][find]") {
  Fixture f;
  const auto g = graph::traverse_dps(f.dp);
  CHECK(f.names.list(graph::find_dps(g, "map")) == "m2,m1");
  CHECK(f.names.list(graph::find_dps(g, "demux_child")) == "c1,c2");
  CHECK(graph::find_dps(g, "shuffle").empty());
  CHECK(f.names.list(graph::find_dps<dpipe::IterDataPipe<int>>(g)) == "m2,c1,ub,src,c2");
}

TEST_CASE("list_dps: breadth-first / with exclusions (T38)", "[graph][list]") {
  Fixture f;
  const auto g = graph::traverse_dps(f.dp);
  CHECK(f.names.list(graph::list_dps(g)) == "dp,m2,c2,c1,dm,ub,m1,src");
  CHECK(f.names.list(graph::list_dps(g, {f.m1.ptr()})) == "dp,m2,c2,c1,dm,ub");
  CHECK(f.names.list(graph::list_dps(g, {f.m2.ptr()})) == "dp,c2");
  CHECK(f.names.list(graph::list_dps(g, {f.m1.ptr(), f.m2.ptr()})) == "dp,c2");
}

TEST_CASE("replace_dp: wrap / wrap again / replace with a source (T39)", "[graph][replace]") {
  Fixture f;
  auto a1 = dpipe::make_iter<Adaptor<std::vector<int>>>(f.m1);
  f.names.add("A1", a1);
  auto g = graph::replace_dp(graph::traverse_dps(f.dp), f.m1.ptr(), a1.ptr());
  CHECK(f.names.text(g) == "dp(m2(c1(dm(ub(A1(m1(src)))))),c2(dm(ub(A1(m1(src))))))");

  auto a2 = dpipe::make_iter<Adaptor<int>>(f.m2);
  f.names.add("A2", a2);
  g = graph::replace_dp(g, f.m2.ptr(), a2.ptr());
  CHECK(f.names.text(g) == "dp(A2(m2(c1(dm(ub(A1(m1(src))))))),c2(dm(ub(A1(m1(src))))))");

  auto dummy = iter::from(std::vector<std::vector<int>>{{7, 8}, {9, 10}});
  f.names.add("D", dummy);
  g = graph::replace_dp(g, f.m1.ptr(), dummy.ptr());
  CHECK(f.names.text(g) == "dp(A2(m2(c1(dm(ub(A1(D)))))),c2(dm(ub(A1(D)))))");
  CHECK(collect(f.dp) == std::vector<std::tuple<int, int>>{{16, 7}, {20, 9}});
}

TEST_CASE("replace_dp: replacing the root with a wrapper of itself", "[graph][replace]") {
  Fixture f;
  auto wrapper = dpipe::make_iter<Adaptor<std::tuple<int, int>>>(f.dp);
  f.names.add("W", wrapper);
  const auto g = graph::replace_dp(graph::traverse_dps(f.dp), f.dp.ptr(), wrapper.ptr());
  CHECK(f.names.text(g) == "W(dp(m2(c1(dm(ub(m1(src))))),c2(dm(ub(m1(src))))))");  // no self-loop
  CHECK(collect(wrapper).size() == 20);
}

TEST_CASE("replace_dp: a replacement of another element type is refused / naming both", "[graph][replace]") {
  Fixture f;
  auto strings = iter::from(std::vector<std::string>{"x"});
  CHECK_THROWS_MATCHES(graph::replace_dp(graph::traverse_dps(f.dp), f.m2.ptr(), strings.ptr()), dpipe::InvalidArgument,
                       Catch::Message("cannot replace input " + f.m2.node().label() + " of " + f.dp.node().label() +
                                      ": the edge reads an iter pipe of int, but " + strings.node().label() +
                                      " is an iter pipe of std::string"));
}

TEST_CASE("remove_dp: receivers read the removed node's input (T40)", "[graph][remove]") {
  Fixture f;
  auto g = graph::remove_dp(graph::traverse_dps(f.dp), f.m2.ptr());
  CHECK(f.names.text(g) == "dp(c1(dm(ub(m1(src)))),c2(dm(ub(m1(src)))))");
  CHECK(collect(f.dp).front() == std::tuple<int, int>{0, 5});
  CHECK_THROWS_MATCHES(graph::remove_dp(g, f.src.ptr()), dpipe::UsageError,
                       Catch::Message("Cannot remove the source DataPipe from the graph of DataPipe"));
  CHECK_THROWS_MATCHES(graph::remove_dp(g, f.dp.ptr()), dpipe::UsageError,
                       Catch::Message("Cannot remove the receiving DataPipe having multiple sending DataPipes"));
  // torchdata removes m1 too; in C++ its input yields int where ub reads std::vector<int>.
  CHECK_THROWS_AS(graph::remove_dp(g, f.m1.ptr()), dpipe::InvalidArgument);
  // Removing the root makes its input the root.
  auto chain = iter::from(range(3)).map([](int x) { return x + 1; }).header(2);
  const auto header_input = chain.node().inputs()[0];
  const auto shorter = graph::remove_dp(graph::traverse_dps(chain), chain.ptr());
  CHECK(shorter.root() == header_input);
}

TEST_CASE("clone: a deep copy that keeps shared nodes shared", "[graph][clone]") {
  Fixture f;
  const auto copy = graph::clone(f.dp);
  const auto original_nodes = graph::list_dps(graph::traverse_dps(f.dp));
  const auto copied_nodes = graph::list_dps(graph::traverse_dps(copy));
  REQUIRE(copied_nodes.size() == original_nodes.size());  // the demux container is copied once
  std::set<std::uint64_t> original_ids;
  for (const auto& node : original_nodes) original_ids.insert(node->id());
  for (std::size_t i = 0; i < copied_nodes.size(); ++i) {
    CHECK(copied_nodes[i]->name() == original_nodes[i]->name());
    CHECK_FALSE(original_ids.contains(copied_nodes[i]->id()));
    // Messages from the copy name the node the user built.
    CHECK(copied_nodes[i]->label() == original_nodes[i]->label());
    CHECK(original_nodes[i]->label() ==
          std::string(original_nodes[i]->name()) + "#" + std::to_string(original_nodes[i]->id()));
  }
  auto it = f.dp.begin();  // iterating the original does not disturb the copy
  ++it;
  CHECK(collect(copy) == collect(f.dp));
  CHECK(collect(copy).size() == 20);
}

TEST_CASE("as_iter: typed handles from type-erased nodes", "[graph][clone]") {
  auto pipe = iter::from(range(3));
  CHECK(collect(graph::as_iter<int>(pipe.ptr())) == range(3));
  CHECK_THROWS_MATCHES(
      graph::as_iter<std::string>(pipe.ptr()), dpipe::InvalidArgument,
      Catch::Message("expected an iter pipe of std::string, but " + pipe.node().label() + " produces int"));
}

TEST_CASE("to_dot: nodes with labels and types / edges input to consumer / clusters", "[graph][dot]") {
  auto src = iter::from(range(3));
  auto mapped = src.map([](int x) { return x * 2.0; });
  const auto s = std::to_string(src.node().id());
  const auto m = std::to_string(mapped.node().id());
  const graph::DotOptions options{"pipeline", {{"worker 0", {src.node().id()}}}};
  CHECK(graph::to_dot(graph::traverse_dps(mapped), options) ==
        "digraph \"pipeline\" {\n"
        "  rankdir=LR;\n"
        "  node [shape=box, style=rounded];\n"
        "  n" +
            m + " [label=\"map#" + m +
            "\\ndouble\"];\n"
            "  n" +
            s + " [label=\"from#" + s +
            "\\nint\"];\n"
            "  subgraph cluster_0 {\n"
            "    label=\"worker 0\";\n"
            "    style=dashed;\n"
            "    n" +
            s +
            ";\n"
            "  }\n"
            "  n" +
            s + " -> n" + m +
            ";\n"
            "}\n");
}

TEST_CASE("set_graph_random_seed: shared seeds before sharding / worker seeds after (T31)", "[graph][seed]") {
  const auto seeds_of = [](std::uint64_t seed, std::uint64_t worker) {
    auto dp0 = iter::from(range(100)).shuffle();
    auto forks = dp0.fork(3);
    auto dp1 = forks[0].sharding_filter();
    auto dp2 = forks[1].shuffle();
    auto dp3 = forks[2].shuffle();
    auto dp3_ = dp3.sharding_filter();
    auto dp4 = dp1.zip(dp2, dp3_).shuffle();
    dpipe::SeedGenerator generator(seed);
    auto spawned = generator.spawn(worker);
    graph::set_graph_random_seed(dp4.ptr(), spawned);
    const auto seed_of = [](const auto& pipe) {
      return *dynamic_cast<iter::Shuffler<typename std::remove_cvref_t<decltype(pipe)>::value_type>&>(pipe.node())
                  .pending_seed();
    };
    return std::vector<std::uint64_t>{seed_of(dp0), seed_of(dp3), seed_of(dp2), seed_of(dp4)};
  };
  const auto w0 = seeds_of(123, 0);
  const auto w1 = seeds_of(123, 1);
  const auto again = seeds_of(123, 0);
  const auto other = seeds_of(321, 0);
  CHECK(w0[0] == w1[0]);  // shared
  CHECK(w0[1] == w1[1]);
  CHECK(w0[2] != w1[2]);  // unique
  CHECK(w0[3] != w1[3]);
  CHECK(w0 == again);
  for (std::size_t i = 0; i < 4; ++i) CHECK(w0[i] != other[i]);
}

TEST_CASE("set_graph_random_seed: exact draw order", "[graph][seed]") {
  auto before = iter::from(range(10)).shuffle();
  auto after = before.sharding_filter().shuffle();
  dpipe::SeedGenerator generator(0);
  auto spawned = generator.spawn(1);
  graph::set_graph_random_seed(after.ptr(), spawned);
  // Before the filter: the shared stream's first value; after it: worker 1's first value.
  CHECK(dynamic_cast<iter::Shuffler<int>&>(before.node()).pending_seed() == 6679402142117448868ULL);
  CHECK(dynamic_cast<iter::Shuffler<int>&>(after.node()).pending_seed() == 9967984995062561209ULL);
  // No sharding point: the worker stream (of worker 1, whose shared and worker streams differ).
  auto unsharded = iter::from(range(10)).shuffle();
  auto worker_one = dpipe::SeedGenerator(0).spawn(1);
  graph::set_graph_random_seed(unsharded.ptr(), worker_one);
  CHECK(dynamic_cast<iter::Shuffler<int>&>(unsharded.node()).pending_seed() == 9967984995062561209ULL);
}

TEST_CASE("apply_shuffle_settings: switches every shuffle", "[graph][shuffle]") {
  auto pipe = iter::from(range(10)).shuffle(3).map([](int x) { return x; }).shuffle(4);
  CHECK(graph::apply_shuffle_settings(pipe.ptr(), false) == 2);
  CHECK(collect(pipe) == range(10));
  CHECK(graph::apply_shuffle_settings(pipe.ptr(), std::nullopt) == 0);
  CHECK(collect(pipe) == range(10));
  CHECK(graph::apply_shuffle_settings(iter::from(range(3)).ptr(), true) == 0);
}

}  // namespace
