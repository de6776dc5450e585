#pragma once
/// \file
/// The I/O wing: file and format nodes, in the `dpipe::io` library target (link `dpipe::io`).
/// Not part of <dpipe/dpipe.hpp>: a trainer that reads no files links none of it.

#include <dpipe/io/decompress.hpp>
#include <dpipe/io/json.hpp>
#include <dpipe/io/list_files.hpp>
#include <dpipe/io/open_files.hpp>
#include <dpipe/io/opened_file.hpp>
#include <dpipe/io/parse_json.hpp>
#include <dpipe/io/readlines.hpp>
