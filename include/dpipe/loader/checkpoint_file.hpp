#pragma once
/// \file
/// Checkpoint files: save a DataLoader2::state_dict() (or graph::save_state) blob so that a crash
/// or a preemption while saving never leaves a truncated checkpoint in place of the last good one,
/// and read it back.
///
///     dpipe::save_checkpoint_file("ckpt/loader.bin", loader.state_dict());
///     resumed.load_state_dict(dpipe::load_checkpoint_file("ckpt/loader.bin"));
///
/// Thread-safety: the functions are reentrant; two writers of the same path leave one whole file.

#include <cstddef>
#include <filesystem>
#include <span>
#include <vector>

namespace dpipe {

/// Writes `blob` to `path` atomically: into a temporary file beside it, flushed to disk (fsync),
/// then renamed over `path`, and the directory flushed, so `path` holds either the previous file
/// or the whole new one. Throws StateError naming the path and the system's reason.
void save_checkpoint_file(const std::filesystem::path& path, std::span<const std::byte> blob);

/// The bytes of the checkpoint file at `path`. Throws StateError naming the path and the reason
/// when it cannot be read; the bytes are checked by load_state_dict / load_state.
[[nodiscard]] std::vector<std::byte> load_checkpoint_file(const std::filesystem::path& path);

}  // namespace dpipe
