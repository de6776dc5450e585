// The Catch2 main of every dpipe test binary.
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>
