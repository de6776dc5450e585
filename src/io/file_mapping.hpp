#pragma once
/// \file
/// FileMapping: a read-only map of a file, read through copies that a file cut short under the
/// map turns into a failed copy instead of a SIGBUS that ends the process. indexed_records reads
/// page-cached records through it with IndexOptions::memory_map. Private to dpipe::io.

#include <cstddef>
#include <cstdint>

namespace dpipe::io::detail {

/// A shared read-only mapping of a file's first bytes. Copying out of it catches the SIGBUS of a
/// page the file no longer has, and refuses bytes that a file cut inside their last page would
/// give as zeros: each copy also reads the first byte of the page after its bytes (the witness),
/// which the file holds only if it still holds all of them; bytes in the mapping's last page are
/// therefore never copied (read them otherwise). Making a mapping makes dpipe's SIGBUS handler the
/// process's, if it is not already: a handler installed later replaces it until the next mapping
/// is made. A signal that no copy's fault raised goes to the handler dpipe's replaced, or ends the
/// process as SIGBUS does by default. At most 16384 mappings live at once in a process (the rest
/// stay unmapped). Thread-safety: copy() may run in any threads at once; the mapping lives until
/// its owner is destroyed, and a forked child keeps it.
class FileMapping {
 public:
  FileMapping() noexcept = default;
  /// Maps the first `size` bytes of `descriptor`; unmapped (mapped() false) when size is 0 or
  /// the kernel refuses (too many maps, a file system without mmap).
  FileMapping(int descriptor, std::uint64_t size) noexcept;
  FileMapping(FileMapping&& other) noexcept;
  FileMapping& operator=(FileMapping&& other) noexcept;
  FileMapping(const FileMapping&) = delete;
  FileMapping& operator=(const FileMapping&) = delete;
  ~FileMapping();

  [[nodiscard]] bool mapped() const noexcept { return data_ != nullptr; }

  /// Asks the CPU to bring the first bytes of [offset, offset + size), and their witness, into
  /// its caches; never faults, and does nothing outside the mapping.
  void prefetch(std::uint64_t offset, std::size_t size) const noexcept;

  /// Copies the bytes [offset, offset + size) of the file to `to`. False, with `to` written in
  /// part, when they or their witness are not within the mapping, or the file no longer holds
  /// them.
  [[nodiscard]] bool copy(std::uint64_t offset, std::size_t size, char* to) const noexcept;

 private:
  /// The offset of the witness of [offset, offset + size): the start of the page after the one
  /// holding its last byte.
  [[nodiscard]] std::uint64_t witness(std::uint64_t offset, std::size_t size) const noexcept;

  const char* data_ = nullptr;
  std::uint64_t size_ = 0;
};

}  // namespace dpipe::io::detail
