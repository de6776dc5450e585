#pragma once
// The sample type of examples/compiled_once.cpp, declared compiled in one translation unit
// (examples/compiled_once_sample.cpp) so that the files building pipelines of it do not compile
// its machinery again.

#include <cstdint>
#include <string>

#include <dpipe/core/element_type.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/serialization/serializer.hpp>

// [declare]
namespace trainer {
struct Sample {
  std::int64_t id = 0;
  std::string path;
  DPIPE_FIELDS(id, path)  // crosses to worker processes and into checkpoints
};
}  // namespace trainer

DPIPE_EXTERN_ELEMENT_TYPE(trainer::Sample);
// [declare]
