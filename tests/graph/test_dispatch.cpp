// find_lca_round_robin_sharding_dp, find_non_dispatching_branches and find_replicable_branches on
// torchdata's fixture (test_graph.py TestNonReplicableDataPipe, reference §3.3 / T42-T46).
//
// dpipe nodes reference only their inputs, so the fixture's cycle (cir_br_dp.cir_dep = cir_map_dp)
// cannot be built. The one row whose result depends on the cycle, insert(cir_br_dp) -> cir_map_dp,
// is left out; every other row gives torchdata's result without it.

#include <algorithm>
#include <numeric>
#include <set>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

#include "support/battery.hpp"
#include "support/graph_text.hpp"

namespace {

namespace iter = dpipe::iter;
namespace graph = dpipe::graph;
using dpipe::DataPipePtr;
using dpipe::IterPipe;

using dpipe::testing::range;

struct Fixture {
  IterPipe<int> single_br_dp = iter::from(range(10));
  IterPipe<int> multi_br_dp = iter::from(range(10));
  std::vector<IterPipe<int>> forks = multi_br_dp.fork(2);
  IterPipe<int> ch1 = forks[0];
  IterPipe<int> ch2 = forks[1];
  DataPipePtr forker_dp = ch1.node().inputs()[0];
  IterPipe<std::tuple<int, int>> fork_zip_dp = ch1.zip(ch2);
  IterPipe<int> cir_br_dp = iter::from(range(10));
  IterPipe<int> cir_map_dp = cir_br_dp.map([](int x) { return x + 1; });
  IterPipe<std::tuple<int, std::tuple<int, int>, int>> end_dp = single_br_dp.zip(fork_zip_dp, cir_map_dp);
  graph::DataPipeGraph graph = graph::traverse_dps(end_dp);
  dpipe::testing::GraphNames names = dpipe::testing::GraphNames()
                                         .add("single_br_dp", single_br_dp)
                                         .add("multi_br_dp", multi_br_dp)
                                         .add("ch1", ch1)
                                         .add("ch2", ch2)
                                         .add("forker_dp", forker_dp)
                                         .add("fork_zip_dp", fork_zip_dp)
                                         .add("cir_br_dp", cir_br_dp)
                                         .add("cir_map_dp", cir_map_dp)
                                         .add("end_dp", end_dp);

  /// Wraps `x` in a sharding_round_robin_dispatch node and returns the dispatcher's name.
  std::string insert(const IterPipe<int>& x) {
    auto dispatcher = x.sharding_round_robin_dispatch(dpipe::ShardingPriority::kMultiprocessing);
    const std::string name = "disp(" + names.name(x.ptr()) + ")";
    names.add(name, dispatcher);
    graph = graph::replace_dp(graph, x.ptr(), dispatcher.ptr());
    return name;
  }

  /// Replaces `x` by a placeholder (torchdata's _DummyIterDataPipe).
  void dummy(const DataPipePtr& x) {
    graph = graph::replace_dp(graph, x, dpipe::apply_typed_op<dpipe::ops::Placeholder>(x));
  }

  std::string lca() const {
    const auto found = graph::find_lca_round_robin_sharding_dp(graph);
    return found ? names.name(found) : "None";
  }

  std::set<std::string> as_set(const std::vector<DataPipePtr>& nodes) const {
    std::set<std::string> result;
    for (const auto& node : nodes) result.insert(names.name(node));
    return result;
  }
  std::set<std::string> non_dispatching() const { return as_set(graph::find_non_dispatching_branches(graph)); }
  std::set<std::string> replicable() const { return as_set(graph::find_replicable_branches(graph)); }
};

using Names = std::set<std::string>;

TEST_CASE("find_lca_round_robin_sharding_dp: torchdata's table (T42-T44)", "[graph][dispatch]") {
  {
    Fixture f;
    CHECK(f.lca() == "None");
  }
  {
    Fixture f;
    const auto disp = f.insert(f.single_br_dp);
    CHECK(f.lca() == disp);
  }
  {
    Fixture f;
    const auto disp = f.insert(f.multi_br_dp);
    CHECK(f.lca() == disp);
  }
  {
    Fixture f;
    f.insert(f.ch1);
    CHECK(f.lca() == "fork_zip_dp");
  }
  {
    Fixture f;
    const auto disp = f.insert(f.cir_map_dp);
    CHECK(f.lca() == disp);
  }
  {
    Fixture f;
    f.insert(f.single_br_dp);
    f.insert(f.multi_br_dp);
    CHECK(f.lca() == "end_dp");
  }
  {
    Fixture f;
    f.insert(f.single_br_dp);
    f.insert(f.ch1);
    CHECK(f.lca() == "end_dp");
  }
  {
    Fixture f;
    f.insert(f.multi_br_dp);
    f.insert(f.ch1);
    CHECK(f.lca() == "fork_zip_dp");
  }
  {
    Fixture f;
    f.insert(f.single_br_dp);
    f.insert(f.cir_br_dp);
    CHECK(f.lca() == "end_dp");
  }
}

TEST_CASE("find_non_dispatching_branches: torchdata's table (T45)", "[graph][dispatch]") {
  {
    Fixture f;
    CHECK(f.non_dispatching() == Names{"end_dp"});
  }
  {
    Fixture f;
    f.dummy(f.single_br_dp.ptr());
    CHECK(f.non_dispatching() == Names{"fork_zip_dp", "cir_map_dp"});
  }
  {
    Fixture f;
    f.dummy(f.multi_br_dp.ptr());
    CHECK(f.non_dispatching() == Names{"single_br_dp", "cir_map_dp"});
  }
  {
    Fixture f;
    f.dummy(f.ch1.ptr());
    CHECK(f.non_dispatching() == Names{"single_br_dp", "ch2", "cir_map_dp"});
  }
  {
    Fixture f;
    f.dummy(f.cir_map_dp.ptr());
    CHECK(f.non_dispatching() == Names{"single_br_dp", "fork_zip_dp"});
  }
  {
    Fixture f;
    f.dummy(f.end_dp.ptr());
    CHECK(f.non_dispatching().empty());
  }
  {
    Fixture f;
    f.dummy(f.fork_zip_dp.ptr());
    CHECK(f.non_dispatching() == Names{"single_br_dp", "cir_map_dp"});
  }
}

TEST_CASE("find_replicable_branches: torchdata's table (T46)", "[graph][dispatch]") {
  const auto with_nonrep = [](std::initializer_list<std::string> nonrep) {
    Fixture f;
    const std::vector<std::pair<std::string, DataPipePtr>> all{{"single_br_dp", f.single_br_dp.ptr()},
                                                               {"multi_br_dp", f.multi_br_dp.ptr()},
                                                               {"ch1", f.ch1.ptr()},
                                                               {"forker_dp", f.forker_dp},
                                                               {"fork_zip_dp", f.fork_zip_dp.ptr()},
                                                               {"cir_map_dp", f.cir_map_dp.ptr()},
                                                               {"end_dp", f.end_dp.ptr()}};
    for (const auto& name : nonrep) {
      const auto it = std::ranges::find(all, name, &std::pair<std::string, DataPipePtr>::first);
      REQUIRE(it != all.end());
      it->second->set_replicable(false);
    }
    return f.replicable();
  };
  CHECK(with_nonrep({}) == Names{"end_dp"});
  CHECK(with_nonrep({"single_br_dp"}) == Names{"fork_zip_dp", "cir_map_dp"});
  CHECK(with_nonrep({"fork_zip_dp"}) == Names{"single_br_dp", "ch1", "ch2", "cir_map_dp"});
  CHECK(with_nonrep({"ch1"}) == Names{"single_br_dp", "forker_dp", "cir_map_dp"});
  CHECK(with_nonrep({"cir_map_dp"}) == Names{"single_br_dp", "fork_zip_dp", "cir_br_dp"});
  CHECK(with_nonrep({"end_dp"}) == Names{"single_br_dp", "fork_zip_dp", "cir_map_dp"});
  CHECK(with_nonrep({"single_br_dp", "multi_br_dp"}) == Names{"cir_map_dp"});
  CHECK(with_nonrep({"single_br_dp", "ch1"}) == Names{"forker_dp", "cir_map_dp"});
  CHECK(with_nonrep({"single_br_dp", "fork_zip_dp"}) == Names{"ch1", "ch2", "cir_map_dp"});
  CHECK(with_nonrep({"single_br_dp", "cir_map_dp"}) == Names{"fork_zip_dp", "cir_br_dp"});
  CHECK(with_nonrep({"forker_dp", "ch1"}) == Names{"single_br_dp", "multi_br_dp", "cir_map_dp"});
  CHECK(with_nonrep({"forker_dp", "cir_map_dp"}) == Names{"single_br_dp", "multi_br_dp", "cir_br_dp"});
  CHECK(with_nonrep({"fork_zip_dp", "cir_map_dp"}) == Names{"single_br_dp", "ch1", "ch2", "cir_br_dp"});
}

TEST_CASE("find_replicable_branches: a non-replicable tail leaves the whole graph below it", "[graph][dispatch]") {
  Fixture f;
  auto tail = f.end_dp.map([](auto element) { return element; });
  tail.node().set_replicable(false);
  const auto branches = graph::find_replicable_branches(graph::traverse_dps(tail));
  REQUIRE(branches.size() == 1);
  CHECK(branches[0] == f.end_dp.ptr());
}

TEST_CASE("placeholder: stands in for a node and cannot be iterated", "[graph][dispatch]") {
  auto pipe = iter::from(range(3));
  auto placeholder = graph::as_iter<int>(dpipe::apply_typed_op<dpipe::ops::Placeholder>(pipe.ptr()));
  CHECK(placeholder.node().name() == "placeholder");
  CHECK_THROWS_MATCHES(
      *placeholder.begin(), dpipe::UsageError,
      Catch::Message(placeholder.node().label() + " stands in for a dispatched branch and cannot be iterated"));
}

}  // namespace
