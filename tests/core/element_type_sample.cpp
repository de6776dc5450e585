// The one translation unit that compiles dpipe_test::Sample's element machinery.

#include "core/element_type_sample.hpp"

DPIPE_INSTANTIATE_ELEMENT_TYPE(dpipe_test::Sample);
