#pragma once
/// \file
/// The spelling users include for <dpipe/loader/dataloader2.hpp>, where the loader's headers live.

#include <dpipe/loader/dataloader2.hpp>
