// The machinery of the element types libdpipe compiles once (see <dpipe/core/element_type.hpp>).

#include <cstdint>
#include <string>
#include <vector>

#include <dpipe/core/iter_datapipe.hpp>

DPIPE_LIBRARY_ELEMENT_TYPES(DPIPE_INSTANTIATE_ELEMENT_TYPE);
