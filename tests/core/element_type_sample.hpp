#pragma once
// A user's element type whose machinery one translation unit compiles
// (<dpipe/core/element_type.hpp>): element_type_sample.cpp instantiates it, and
// test_element_type.cpp only uses it.

#include <cstdint>
#include <string>

#include <dpipe/core/element_type.hpp>
#include <dpipe/core/iter_datapipe.hpp>
#include <dpipe/serialization/serializer.hpp>

namespace dpipe_test {

struct Sample {
  std::int64_t id = 0;
  std::string label;
  DPIPE_FIELDS(id, label)
  friend bool operator==(const Sample&, const Sample&) = default;
};

}  // namespace dpipe_test

DPIPE_EXTERN_ELEMENT_TYPE(dpipe_test::Sample);
