#pragma once
/// \file
/// The umbrella header: everything dpipe offers.

#define DPIPE_VERSION_MAJOR 0
#define DPIPE_VERSION_MINOR 1
#define DPIPE_VERSION_PATCH 0

#include <dpipe/core/concepts.hpp>
#include <dpipe/core/datapipe.hpp>
#include <dpipe/core/error.hpp>
#include <dpipe/core/input.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/core/iter_pipe.hpp>
#include <dpipe/core/logging.hpp>
#include <dpipe/core/map_datapipe.hpp>
#include <dpipe/core/map_pipe.hpp>
#include <dpipe/core/state.hpp>
#include <dpipe/core/type_name.hpp>
#include <dpipe/graph/dispatch.hpp>
#include <dpipe/graph/dot.hpp>
#include <dpipe/graph/graph.hpp>
#include <dpipe/graph/settings.hpp>
#include <dpipe/graph/state.hpp>
#include <dpipe/iter/batch.hpp>
#include <dpipe/iter/concat.hpp>
#include <dpipe/iter/cycle.hpp>
#include <dpipe/iter/demux.hpp>
#include <dpipe/iter/enumerate.hpp>
#include <dpipe/iter/filter.hpp>
#include <dpipe/iter/flatmap.hpp>
#include <dpipe/iter/fork.hpp>
#include <dpipe/iter/from.hpp>
#include <dpipe/iter/header.hpp>
#include <dpipe/iter/map.hpp>
#include <dpipe/iter/mux.hpp>
#include <dpipe/iter/prefetch.hpp>
#include <dpipe/iter/sharding.hpp>
#include <dpipe/iter/shuffle.hpp>
#include <dpipe/iter/zip.hpp>
#include <dpipe/map/from.hpp>
#include <dpipe/map/map.hpp>
#include <dpipe/map/to_iter.hpp>
#include <dpipe/random/philox.hpp>
#include <dpipe/random/python_random.hpp>
#include <dpipe/random/seed_generator.hpp>
#include <dpipe/serialization/serializer.hpp>
