#pragma once
/// \file
/// The tag that makes a parsing node yield (path, value) pairs instead of the values alone
/// (torchdata's return_path=True): `io::parse_csv(options, io::with_path)`,
/// `io::parse_jsonl(options, io::with_path)`.

namespace dpipe::io {

/// Tag: the node yields (path, value) pairs.
struct WithPath {};
inline constexpr WithPath with_path{};

}  // namespace dpipe::io
