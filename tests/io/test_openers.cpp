// The opener registry: a user's own scheme opened by open_files(), reopened by checkpoint
// restores in process and in worker processes and threads; the errors for a scheme without an
// opener and for a second registration; dpipe's own origins reopening as checkpoints saved them.

#include <algorithm>
#include <charconv>
#include <cstring>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/io_workers.hpp"
#include "support/log_capture.hpp"
#include "support/temp_dir.hpp"

namespace {

using dpipe::io::OpenedFile;
using dpipe::io::PathLine;
using dpipe::testing::data_error_of;
using dpipe::testing::TempDir;

/// The lines "0" to "<n-1>", made as they are read. It cannot seek: a restore reads up to its
/// offset, as from a stream that is not a file.
class CountSource final : public dpipe::io::ByteSource {
 public:
  explicit CountSource(unsigned lines) : lines_(lines) {}

  std::size_t read(char* data, std::size_t size) override {
    std::size_t got = 0;
    while (got < size) {
      if (at_ == line_.size()) {
        if (next_ == lines_) break;
        line_ = std::to_string(next_++) + "\n";
        at_ = 0;
      }
      const std::size_t take = std::min(size - got, line_.size() - at_);
      std::memcpy(data + got, line_.data() + at_, take);
      got += take;
      at_ += take;
    }
    return got;
  }

 private:
  unsigned lines_;
  unsigned next_ = 0;
  std::string line_;
  std::size_t at_ = 0;
};

/// The origins the "count" opener opened, in order (worker threads open at once).
struct Opened {
  std::mutex mutex;
  std::vector<std::string> origins;
};

Opened& opened() {
  static Opened instance;
  return instance;
}

/// The origins opened since the last call.
std::vector<std::string> take_opened() {
  const std::lock_guard lock(opened().mutex);
  return std::exchange(opened().origins, {});
}

/// Registers the scheme "count" ("count://<n>": the lines of a CountSource) once in this process:
/// a registration lasts as long as the process.
void register_count_scheme() {
  static const bool registered = [] {
    dpipe::io::register_opener("count", [](const std::string& origin, std::string_view node) {
      constexpr std::string_view kPrefix = "count://";
      const char* const end = origin.data() + origin.size();
      unsigned lines = 0;
      const auto parsed = origin.starts_with(kPrefix) ? std::from_chars(origin.data() + kPrefix.size(), end, lines)
                                                      : std::from_chars_result{nullptr, std::errc::invalid_argument};
      if (parsed.ec != std::errc{} || parsed.ptr != end)
        throw dpipe::DataError(node, {.path = origin}, "cannot open: not a count of lines");
      {
        const std::lock_guard lock(opened().mutex);
        opened().origins.push_back(origin);
      }
      return OpenedFile(origin, origin, std::make_unique<CountSource>(lines));
    });
    return true;
  }();
  (void)registered;
}

/// The schemes registered in this test program: dpipe's own and "count".
constexpr const char* kRegistered = "bz2, count, file, gzip, http, https, lzma, s3, xz, zstd";

std::string read_all(OpenedFile& file) {
  std::string bytes(64, '\0');
  std::string all;
  while (const std::size_t got = file.read(bytes.data(), bytes.size(), "test")) all.append(bytes.data(), got);
  return all;
}

}  // namespace

TEST_CASE("A user's scheme opens through open_files and runs the standard battery", "[io][opener]") {
  register_count_scheme();
  CHECK(dpipe::io::registered_schemes() ==
        std::vector<std::string>{"bz2", "count", "file", "gzip", "http", "https", "lzma", "s3", "xz", "zstd"});
  const std::vector<std::string> paths{"count://3", "count://0", "count://2"};
  const auto make = [&] { return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::readlines(); };
  const auto lines = dpipe::testing::collect(make());
  CHECK(lines ==
        std::vector<PathLine>{
            {"count://3", "0"}, {"count://3", "1"}, {"count://3", "2"}, {"count://2", "0"}, {"count://2", "1"}});
  dpipe::testing::check_battery(make, lines, std::nullopt);

  SECTION("a checkpoint restore reopens only the stream being read, at the saved offset") {
    const auto pipe = make();
    (void)dpipe::testing::take(pipe, 2);  // "0" and "1" of count://3: "2" starts at byte 4
    const auto blob = dpipe::graph::save_state(pipe);
    (void)take_opened();
    const auto restored = make();
    dpipe::graph::load_state(restored, blob);
    CHECK(take_opened() == std::vector<std::string>{"count://3"});
    CHECK(dpipe::testing::collect(restored) ==
          std::vector<PathLine>{{"count://3", "2"}, {"count://2", "0"}, {"count://2", "1"}});
    CHECK(take_opened() == std::vector<std::string>{"count://0", "count://2"});

    auto file = OpenedFile::reopen("count://3", 4, "test");
    CHECK(file.path() == "count://3");
    CHECK(file.offset() == 4);
    CHECK(read_all(file) == "2\n");
  }
  SECTION("the opener's own error, with OnError::skip too") {
    const auto bad = [](dpipe::OnError on_error) {
      return dpipe::iter::from(std::vector<std::string>{"count://x", "count://1"}) | dpipe::io::open_files(on_error) |
             dpipe::io::readlines({}, dpipe::io::lines_only);
    };
    CHECK_THAT(data_error_of(bad({})),
               Catch::Matches("open_files#[0-9]+: 'count://x': cannot open: not a count of lines"));
    dpipe::testing::LogCapture log;
    CHECK(dpipe::testing::collect(bad(dpipe::OnError::skip())) == std::vector<std::string>{"0"});
    const auto messages = log.messages();
    REQUIRE(messages.size() == 1);
    CHECK_THAT(messages[0], Catch::Matches("open_files#[0-9]+: 'count://x': cannot open: not a count of lines; "
                                           "skipped \\(1 in this epoch\\)"));
  }
}

TEST_CASE("Worker processes and threads open a user's scheme and restore mid-epoch", "[io][opener][concurrency]") {
  register_count_scheme();  // before the loader forks its workers: they inherit the registry
  std::vector<std::string> paths;
  std::vector<std::string> all;
  for (unsigned file = 0; file < 6; ++file) {
    paths.push_back("count://" + std::to_string(file + 2));
    for (unsigned line = 0; line < file + 2; ++line) all.push_back(std::to_string(line));
  }
  dpipe::testing::check_workers(
      [&] {
        return dpipe::iter::from(paths) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
               dpipe::io::open_files() | dpipe::io::readlines({}, dpipe::io::lines_only);
      },
      all);
}

TEST_CASE("A scheme without an opener is a DataError naming the stream and the registered schemes", "[io][opener]") {
  register_count_scheme();
  CHECK_THAT(data_error_of(dpipe::iter::from(std::vector<std::string>{"gs://bucket/a.txt"}) | dpipe::io::open_files() |
                           dpipe::io::readlines()),
             Catch::Matches("open_files#[0-9]+: 'gs://bucket/a.txt': cannot open: no opener is registered for the "
                            "scheme 'gs' \\(registered: " +
                            std::string(kRegistered) + "\\)"));
  CHECK(data_error_of([] { (void)OpenedFile::reopen("gs://bucket/a.txt", 7, "readlines#4"); }) ==
        "readlines#4: 'gs://bucket/a.txt': cannot open: no opener is registered for the scheme 'gs' (registered: " +
            std::string(kRegistered) + ")");
  CHECK(data_error_of([] { (void)OpenedFile::reopen("/data/a.txt", 0, "readlines#4"); }) ==
        "readlines#4: '/data/a.txt': cannot open: it starts with no scheme (registered: " + std::string(kRegistered) +
            ")");
  CHECK(data_error_of([] { (void)OpenedFile::reopen("gzip[x]:file:/data/a.gz", 0, "readlines#4"); }) ==
        "readlines#4: 'gzip[x]:file:/data/a.gz': cannot open: not an origin the 'gzip' opener reads");
  CHECK(data_error_of([] { (void)OpenedFile::reopen("http[length=1,speed=9]:http://host/a", 0, "readlines#4"); }) ==
        "readlines#4: 'http[length=1,speed=9]:http://host/a': cannot open: not an origin the 'http' opener reads");

  SECTION("a path without \"scheme://\" is a local file, colons and all") {
    TempDir dir;
    const std::string path = dir.write("s3:a.txt", "local\n");
    auto file = OpenedFile::open(path);
    CHECK(file.origin() == "file:" + path);
    CHECK(read_all(file) == "local\n");
  }
}

TEST_CASE("A scheme is registered once and only with a valid name and an opener", "[io][opener]") {
  register_count_scheme();
  const dpipe::io::Opener opener = [](const std::string& origin, std::string_view) {
    return OpenedFile(origin, origin, std::make_unique<CountSource>(1));
  };
  CHECK_THROWS_MATCHES(dpipe::io::register_opener("count", opener), dpipe::InvalidArgument,
                       Catch::Message("register_opener: the scheme 'count' has an opener already"));
  CHECK_THROWS_MATCHES(dpipe::io::register_opener("file", opener), dpipe::InvalidArgument,
                       Catch::Message("register_opener: the scheme 'file' has an opener already"));
  for (const char* name : {"", "S3", "3d", "s3:", "my scheme"}) {
    INFO(name);
    CHECK_THROWS_MATCHES(dpipe::io::register_opener(name, opener), dpipe::InvalidArgument,
                         Catch::Message("register_opener: '" + std::string(name) +
                                        "' is not a scheme (a lowercase letter, then lowercase letters, digits, '+', "
                                        "'-' or '.')"));
  }
  CHECK_THROWS_MATCHES(dpipe::io::register_opener("empty", dpipe::io::Opener{}), dpipe::InvalidArgument,
                       Catch::Message("register_opener: the opener for 'empty' is empty"));
  CHECK_THAT(data_error_of([] { (void)OpenedFile::open("empty://a"); }),
             Catch::Contains("no opener is registered for the scheme 'empty'"));
}

TEST_CASE("dpipe's own origins reopen as checkpoints saved them", "[io][opener]") {
  TempDir dir;
  const std::string plain = dir.write("a.txt", "one\ntwo\n");
  const std::string packed = dir / "a.txt.gz";
  dpipe::testing::write_compressed(packed, "gzip", "one\ntwo\n");
  const std::string zstd = dir / "a.txt.zst";
  dpipe::testing::write_compressed(zstd, "zstd", "one\ntwo\n");

  auto file = OpenedFile::reopen("file:" + plain, 4, "test");
  CHECK(file.path() == plain);
  CHECK(file.origin() == "file:" + plain);
  CHECK(read_all(file) == "two\n");

  auto gzip = OpenedFile::reopen("gzip[0]:file:" + packed, 4, "test");
  CHECK(gzip.path() == packed);
  CHECK(gzip.origin() == "gzip[0]:file:" + packed);
  CHECK(read_all(gzip) == "two\n");
  // A hold_back other than the default travels in the origin.
  auto held = OpenedFile::reopen("gzip[0,65536]:file:" + packed, 4, "test");
  CHECK(held.origin() == "gzip[0,65536]:file:" + packed);
  CHECK(read_all(held) == "two\n");
  CHECK(data_error_of([&] { (void)OpenedFile::reopen("gzip[0,]:file:" + packed, 0, "test"); }) ==
        "test: 'gzip[0,]:file:" + packed + "': cannot open: not an origin the 'gzip' opener reads");

  auto limited = OpenedFile::reopen("zstd[5]:file:" + zstd, 4, "test");
  CHECK(limited.origin() == "zstd[5]:file:" + zstd);
  CHECK(data_error_of([&] { (void)read_all(limited); }) ==
        "test: '" + zstd + "' byte offset 4: decompresses to more than max_bytes (5) bytes");

  auto opened_through_scheme = OpenedFile::open("file://" + plain);  // "file:" + "//<path>", a local path
  CHECK(opened_through_scheme.origin() == "file://" + plain);
  CHECK(read_all(opened_through_scheme) == "one\ntwo\n");
}
