// Node settings: what a checkpoint records of each node's configuration (DataPipe::settings()).

#include <string>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>

#include "support/battery.hpp"

namespace {

using dpipe::NodeSettings;
using dpipe::testing::range;
namespace iter = dpipe::iter;

/// The settings of the node `pipe` reads from (the shared node behind fork's or demux's outputs).
template <class P>
NodeSettings input_settings(const P& pipe) {
  return pipe.ptr()->inputs().at(0)->settings();
}

TEST_CASE("node settings: every node that shapes the data reports its configuration", "[graph][settings]") {
  const auto source = iter::from(range(12));
  CHECK(source.ptr()->settings() == NodeSettings{{"length", "12"}});
  CHECK(source.batch(4, true).ptr()->settings() == NodeSettings{{"batch_size", "4"}, {"drop_last", "true"}});
  CHECK(source.shuffle(7).ptr()->settings() == NodeSettings{{"buffer_size", "7"}});
  CHECK(source.header(3).ptr()->settings() == NodeSettings{{"limit", "3"}});
  CHECK(source.cycle().ptr()->settings() == NodeSettings{{"count", "none"}});
  CHECK(source.cycle(2).ptr()->settings() == NodeSettings{{"count", "2"}});
  CHECK(source.repeat(5).ptr()->settings() == NodeSettings{{"times", "5"}});
  CHECK(source.enumerate(10).ptr()->settings() == NodeSettings{{"starting_index", "10"}});
  CHECK(source.map_batches([](std::vector<int> batch) { return batch; }, 6).ptr()->settings() ==
        NodeSettings{{"batch_size", "6"}});
  CHECK(source.groupby([](int x) { return x % 3; }, dpipe::GroupByOptions().buffer_size(9).group_size(2))
            .ptr()
            ->settings() ==
        NodeSettings{
            {"buffer_size", "9"}, {"group_size", "2"}, {"guaranteed_group_size", "2"}, {"drop_remaining", "false"}});
  CHECK(input_settings(source.fork(3, 50).at(0)) == NodeSettings{{"num_instances", "3"}, {"buffer_size", "50"}});
  CHECK(input_settings(source
                           .demux(
                               2, [](int x) { return x % 2; }, false, 40)
                           .at(1)) == NodeSettings{{"num_instances", "2"}, {"buffer_size", "40"}});
  CHECK(input_settings(source.random_split({{"train", 0.75}, {"test", 0.25}}, 9).at(0)) ==
        NodeSettings{{"seed", "9"}, {"total_length", "12"}, {"weight train", "9.000000"}, {"weight test", "3.000000"}});
  const auto mapped = dpipe::map::from(range(8));
  CHECK(mapped.ptr()->settings() == NodeSettings{{"length", "8"}});
  CHECK(mapped.batch(3).ptr()->settings() == NodeSettings{{"batch_size", "3"}, {"drop_last", "false"}});
  // Nodes whose settings do not change the data report none.
  CHECK(source.map([](int x) { return x; }).ptr()->settings().empty());
  CHECK(source.prefetch(4).ptr()->settings().empty());
}

TEST_CASE("sharded_length: what one instance of the sharded graph yields / the graph is not changed",
          "[graph][settings]") {
  auto pipe = iter::from(range(10)).shuffle().sharding_filter().batch(3);
  CHECK(dpipe::graph::sharded_length(pipe.ptr(), 3, 0) == 2);  // 4 elements: 3 + 1
  CHECK(dpipe::graph::sharded_length(pipe.ptr(), 3, 2) == 1);  // 3 elements
  CHECK(dpipe::graph::sharded_length(pipe.ptr(), 1, 0) == 4);
  CHECK(pipe.length() == 4);  // the original stays unsharded
  CHECK(dpipe::graph::sharded_length(iter::from(range(10)).filter([](int) { return true; }).ptr(), 2, 0) ==
        std::nullopt);
  CHECK_THROWS_MATCHES(dpipe::graph::sharded_length(pipe.ptr(), 3, 3), dpipe::InvalidArgument,
                       Catch::Message("instance_id(3) should be smaller than num_of_instances(3)"));
}

}  // namespace
