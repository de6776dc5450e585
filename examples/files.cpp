// Trains over a directory of WebDataset tar shards with two worker processes. The example writes
// its shards itself (4 tars of 25 samples, each sample a caption and a label), then reads them:
// the shard names are expanded, shuffled and sharded in the trainer's graph, each worker opens
// and unpacks only its own shards, and a checkpoint in the middle of the epoch resumes exactly.
// Then a shard cut at a member boundary, read with WebDataset's helpers (rename, decode by suffix,
// to_tuple): its incomplete last sample is skipped.

#include <archive.h>
#include <archive_entry.h>
#include <cstdio>
#include <filesystem>
#include <string>
#include <unistd.h>
#include <utility>
#include <variant>
#include <vector>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

namespace {

/// Writes a tar at `path` with one member per (name, bytes) pair, using libarchive's writer.
void write_tar(const std::string& path, const std::vector<std::pair<std::string, std::string>>& members) {
  archive* tar = archive_write_new();
  archive_write_set_format_pax_restricted(tar);
  archive_write_open_filename(tar, path.c_str());
  for (const auto& [name, bytes] : members) {
    archive_entry* entry = archive_entry_new();
    archive_entry_set_pathname(entry, name.c_str());
    archive_entry_set_filetype(entry, AE_IFREG);
    archive_entry_set_perm(entry, 0644);
    archive_entry_set_size(entry, static_cast<la_int64_t>(bytes.size()));
    archive_write_header(tar, entry);
    archive_write_data(tar, bytes.data(), bytes.size());
    archive_entry_free(entry);
  }
  archive_write_close(tar);
  archive_write_free(tar);
}

}  // namespace

int main() {
  const auto dir = std::filesystem::temp_directory_path() / ("dpipe-files-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  for (int shard = 0; shard < 4; ++shard) {
    std::vector<std::pair<std::string, std::string>> members;
    for (int sample = shard * 25; sample < (shard + 1) * 25; ++sample) {
      const auto key = std::to_string(100000 + sample).substr(1);  // "00042"
      members.emplace_back(key + ".txt", "a caption for sample " + std::to_string(sample));
      members.emplace_back(key + ".cls", std::to_string(sample));
    }
    write_tar((dir / ("shard-" + std::to_string(shard) + ".tar")).string(), members);
  }
  // [pipeline]
  using Batch = std::vector<int>;
  auto make_loader = [&] {
    const auto decode_label = [](const dpipe::io::WebDatasetSample& sample) { return std::stoi(sample[".cls"]); };
    const dpipe::io::WebDatasetOptions complete{.required_suffixes = {".txt", ".cls"},
                                                .on_error = dpipe::OnError::skip()};
    auto labels = dpipe::iter::from(std::vector<std::string>{(dir / "shard-{0..3}.tar").string()})  // a pattern
                  | dpipe::io::shard_expand()        // shard-0.tar ... shard-3.tar
                  | dpipe::iter::shuffle()           // the same shard order in every worker
                  | dpipe::iter::sharding_filter()   // each worker keeps its shards
                  | dpipe::io::open_files()          // opened in the worker
                  | dpipe::io::load_from_tar()       // (path, bytes) per member
                  | dpipe::io::webdataset(complete)  // grouped by key; a sample without .txt or .cls is skipped
                  | dpipe::iter::map(decode_label, dpipe::OnError::skip())  // decoded in the worker, or skipped
                  | dpipe::iter::batch(5);
    return dpipe::DataLoader2<Batch>(labels, dpipe::MultiProcessingReadingService({.num_workers = 2}));
  };
  // [pipeline]
  auto loader = make_loader();
  loader.seed(7);
  int before = 0;
  int label_sum = 0;
  std::size_t batches = 0;
  std::vector<std::byte> checkpoint;
  for (const auto& batch : loader) {
    for (const int label : batch) label_sum += label;
    before += static_cast<int>(batch.size());
    if (++batches == 7) {
      checkpoint = loader.state_dict();  // a scheduler's SIGTERM would save here
      break;
    }
  }
  auto resumed = make_loader();
  resumed.load_state_dict(checkpoint);
  int after = 0;
  for (const auto& batch : resumed) {
    for (const int label : batch) label_sum += label;
    after += static_cast<int>(batch.size());
  }
  std::printf("%d samples before the checkpoint, %d after: %d in all, label sum %d\n", before, after, before + after,
              label_sum);

  // A shard cut after "00102.jpg": a whole tar to libarchive, whose last sample has no label.
  const auto cut = (dir / "cut.tar").string();
  write_tar(cut, {{"00100.jpg", "jpeg-100"},
                  {"00100.cls", "100"},
                  {"00101.png", "png-101"},
                  {"00101.cls", "101"},
                  {"00102.jpg", "jpeg-102"}});
  // [helpers]
  using Field = std::variant<std::string, int>;  // what the decoders make
  const dpipe::io::FieldDecoders<Field> decoders{
      {".image", [](const std::string& bytes) { return "decoded " + bytes; }},  // an image decoder would be here
      {".cls", [](const std::string& bytes) { return std::stoi(bytes); }},
  };
  const dpipe::io::WebDatasetOptions labelled{.required_suffixes = {".jpg;.png", ".cls"},
                                              .on_error = dpipe::OnError::skip()};
  auto pairs = dpipe::iter::from(std::vector<std::string>{cut})                         // one shard
               | dpipe::io::open_files()                                                // opened
               | dpipe::io::load_from_tar()                                             // (path, bytes) per member
               | dpipe::io::webdataset(labelled)                                        // 00102 has no .cls: skipped
               | dpipe::iter::map(dpipe::io::rename_fields({{".image", ".jpg;.png"}}))  // either is ".image"
               | dpipe::iter::map(dpipe::io::decode_fields(decoders))                   // by suffix
               | dpipe::iter::map(dpipe::io::to_tuple<std::string, int>(".image", ".cls"));  // (image, label)
  std::string read;
  for (const auto& [image, label] : pairs) read += " (" + image + ", " + std::to_string(label) + ")";
  // [helpers]
  std::printf("cut shard:%s\n", read.c_str());
  std::filesystem::remove_all(dir);
  return 0;
}
