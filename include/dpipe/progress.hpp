#pragma once
/// \file
/// The spelling users include for <dpipe/loader/progress.hpp>, where the loader's headers live.

#include <dpipe/loader/progress.hpp>
