#pragma once
/// \file
/// The spelling users include for <dpipe/loader/checkpoint_file.hpp>, where the loader's headers live.

#include <dpipe/loader/checkpoint_file.hpp>
