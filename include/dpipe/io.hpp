#pragma once
/// \file
/// The I/O wing: file and format nodes, in the `dpipe::io` library target (link `dpipe::io`).
/// Not part of <dpipe/dpipe.hpp>: a trainer that reads no files links none of it.

#include <dpipe/io/byte_source.hpp>
#include <dpipe/io/csv.hpp>
#include <dpipe/io/decompress.hpp>
#include <dpipe/io/file_cursor.hpp>
#include <dpipe/io/file_reader.hpp>
#include <dpipe/io/in_blocks.hpp>
#include <dpipe/io/indexed_records.hpp>
#include <dpipe/io/json.hpp>
#include <dpipe/io/json_block.hpp>
#include <dpipe/io/line_block.hpp>
#include <dpipe/io/list_files.hpp>
#include <dpipe/io/load_from_archive.hpp>
#include <dpipe/io/open_files.hpp>
#include <dpipe/io/opened_file.hpp>
#include <dpipe/io/opener.hpp>
#include <dpipe/io/parse_json.hpp>
#include <dpipe/io/read_from_http.hpp>
#include <dpipe/io/readlines.hpp>
#include <dpipe/io/s3.hpp>
#include <dpipe/io/record_index.hpp>
#include <dpipe/io/shard_expand.hpp>
#include <dpipe/io/tfrecord.hpp>
#include <dpipe/io/webdataset.hpp>
#include <dpipe/io/webdataset_fields.hpp>
#include <dpipe/io/with_path.hpp>
