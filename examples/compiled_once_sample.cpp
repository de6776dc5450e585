// The one translation unit that compiles trainer::Sample's element machinery.

#include "compiled_once_sample.hpp"

// [instantiate]
DPIPE_INSTANTIATE_ELEMENT_TYPE(trainer::Sample);
// [instantiate]
