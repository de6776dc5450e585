// The I/O wing's file nodes: list_files, open_files, readlines. Real files in a fresh directory
// per test; the standard battery; bad data (missing files, overlong lines) with exact messages;
// worker processes and threads reading sharded paths; checkpoints that reopen only the file
// being read.

#include <array>
#include <filesystem>
#include <fstream>
#include <functional>
#include <grp.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

#include <catch2/catch.hpp>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/io_workers.hpp"
#include "support/loader.hpp"
#include "support/log_capture.hpp"
#include "support/temp_dir.hpp"

namespace {

namespace fs = std::filesystem;
using dpipe::DataError;
using dpipe::io::PathLine;
using dpipe::testing::TempDir;
using dpipe::testing::TextFiles;

std::vector<std::string> lines_of(const std::vector<PathLine>& pairs) {
  std::vector<std::string> lines;
  for (const auto& [path, line] : pairs) lines.push_back(line);
  return lines;
}

}  // namespace

TEST_CASE("list_files lists a directory's matching files in sorted order", "[io]") {
  TempDir dir;
  (void)dir.write("b.txt", "");
  (void)dir.write("a.txt", "");
  (void)dir.write("c.csv", "");
  (void)dir.write("sub/d.txt", "");
  (void)dir.write(".hidden.txt", "");
  const std::string root = dir.str();
  CHECK(dpipe::testing::collect(dpipe::io::list_files(root)) ==
        std::vector<std::string>{root + "/.hidden.txt", root + "/a.txt", root + "/b.txt", root + "/c.csv"});
  CHECK(dpipe::testing::collect(dpipe::io::list_files(root, {"*.txt"})) ==
        std::vector<std::string>{root + "/.hidden.txt", root + "/a.txt", root + "/b.txt"});
  CHECK(dpipe::testing::collect(dpipe::io::list_files(root + "/", {"?.csv", "a*"})) ==
        std::vector<std::string>{root + "/a.txt", root + "/c.csv"});
  SECTION("recursive: each directory's files, then its subdirectories in sorted order") {
    (void)dir.write("sub/a/z.txt", "");
    (void)dir.write("sub/b/y.txt", "");
    (void)dir.write("aa/x.txt", "");
    CHECK(dpipe::testing::collect(dpipe::io::list_files(root, {"[a-z].txt"}, {.recursive = true})) ==
          std::vector<std::string>{root + "/a.txt", root + "/b.txt", root + "/aa/x.txt", root + "/sub/d.txt",
                                   root + "/sub/a/z.txt", root + "/sub/b/y.txt"});
  }
  SECTION("a root that is a file, several roots, absolute paths") {
    const std::string file = dir / "b.txt";
    CHECK(dpipe::testing::collect(dpipe::io::list_files({file, root + "/sub"}, {"*.txt"})) ==
          std::vector<std::string>{file, root + "/sub/d.txt"});
    CHECK(dpipe::testing::collect(dpipe::io::list_files(file, {"*.csv"})).empty());
    const auto relative = fs::relative(root + "/sub", fs::current_path()).string() + "/../sub/";
    CHECK(dpipe::testing::collect(dpipe::io::list_files(relative, {}, {.abspath = true})) ==
          std::vector<std::string>{fs::canonical(root).string() + "/sub/d.txt"});
  }
}

TEST_CASE("list_files warns about a root where nothing matches / or raises with empty_is_error", "[io]") {
  TempDir dir;
  (void)dir.write("a.txt", "");
  const std::string root = dir.str();
  const std::string file = dir / "a.txt";
  dpipe::testing::LogCapture log;
  const auto listing = dpipe::io::list_files({root, file}, {"*.tar", "*.tgz"});
  CHECK(dpipe::testing::collect(listing).empty());
  const std::string label = listing.node().label();
  CHECK(log.messages() ==
        std::vector<std::string>{label + ": '" + root + "': no files matched the masks ['*.tar', '*.tgz']",
                                 label + ": '" + file + "': no files matched the masks ['*.tar', '*.tgz']"});
  const auto empty_directory = dpipe::io::list_files(root + "/sub", {}, {.empty_is_error = true});
  fs::create_directory(dir / "sub");
  CHECK(dpipe::testing::data_error_of(empty_directory) ==
        empty_directory.node().label() + ": '" + root + "/sub': no files found");
  // A root that lists a file says nothing; the next epoch's listing warns again.
  CHECK(dpipe::testing::collect(dpipe::io::list_files({root, file}, {"a.*"})) == std::vector<std::string>{file, file});
  REQUIRE(log.messages().size() == 2);
  CHECK(dpipe::testing::collect(listing).empty());
  CHECK(log.messages().size() == 4);
}

TEST_CASE("list_files runs the standard battery", "[io]") {
  TempDir dir;
  std::vector<std::string> expected;
  for (const char* name : {"0.txt", "1.txt", "2.txt", "3.txt", "4.txt", "5.txt"})
    expected.push_back(dir.write(name, ""));
  dpipe::testing::check_battery([&] { return dpipe::io::list_files(dir.str()); }, expected, std::nullopt);
}

TEST_CASE("list_files refuses a missing root and a checkpoint of a directory that changed", "[io]") {
  TempDir dir;
  try {
    (void)dpipe::testing::collect(dpipe::io::list_files(dir / "missing"));
    FAIL("no DataError");
  } catch (const DataError& error) {
    CHECK_THAT(error.what(), Catch::Matches("list_files#[0-9]+: '" + (dir / "missing") +
                                            "': cannot list: No such file or directory"));
    CHECK(error.path() == dir / "missing");
  }
  CHECK_THROWS_WITH(dpipe::io::list_files(std::vector<std::string>{}), "list_files: no root given");

  (void)dir.write("a.txt", "");
  (void)dir.write("b.txt", "");
  const auto pipe = dpipe::io::list_files(dir.str());
  (void)dpipe::testing::take(pipe, 1);
  const auto blob = dpipe::graph::save_state(pipe);
  fs::remove(dir / "a.txt");
  (void)dir.write("0.txt", "");
  try {
    dpipe::graph::load_state(dpipe::io::list_files(dir.str()), blob);
    FAIL("no StateError");
  } catch (const dpipe::StateError& error) {
    CHECK_THAT(
        error.what(),
        Catch::Contains("the files changed since the checkpoint: it had yielded 1 paths, the last '" + (dir / "a.txt") +
                        "', and the listing now has 2 paths, path 1 being '" + (dir / "0.txt") + "'"));
  }
}

TEST_CASE("readlines yields each file's lines with its path", "[io]") {
  TextFiles files;
  const auto lines = [&](dpipe::io::ReadLinesOptions options) {
    return dpipe::io::list_files(files.dir.str()) | dpipe::io::open_files() | dpipe::io::readlines(options);
  };
  CHECK(dpipe::testing::collect(lines({})) == std::vector<PathLine>{{files.a, "header"},
                                                                    {files.a, "one"},
                                                                    {files.a, "two"},
                                                                    {files.a, ""},
                                                                    {files.a, "three"},
                                                                    {files.b, "header"},
                                                                    {files.b, "four"},
                                                                    {files.b, "five"}});
  CHECK(lines_of(dpipe::testing::collect(lines({.skip_lines = 1}))) ==
        std::vector<std::string>{"one", "two", "", "three", "four", "five"});
  CHECK(lines_of(dpipe::testing::collect(lines({.skip_lines = 4, .strip_newline = false}))) ==
        std::vector<std::string>{"three\n"});
  CHECK(lines_of(dpipe::testing::collect(lines({.skip_lines = 1, .strip_newline = false}))) ==
        std::vector<std::string>{"one\n", "two\n", "\n", "three\n", "four\n", "five"});
  const auto only = dpipe::io::list_files(files.dir.str()) | dpipe::io::open_files() |
                    dpipe::io::readlines({.skip_lines = 5}, dpipe::io::lines_only);
  CHECK(dpipe::testing::collect(only) == std::vector<std::string>{});
  CHECK_THROWS_WITH(
      dpipe::io::list_files(files.dir.str()) | dpipe::io::open_files() | dpipe::io::readlines({.max_line_bytes = 0}),
      "readlines: max_line_bytes must be > 0");
}

TEST_CASE("readlines runs the standard battery over lines longer than its read block", "[io]") {
  TempDir dir;
  std::vector<std::string> expected;
  std::vector<std::string> paths;
  for (int file = 0; file < 3; ++file) {
    std::string text;
    for (int line = 0; line < 4; ++line) {
      // Lines of up to 100 KiB: longer than the 64 KiB blocks it reads.
      const std::string content = std::to_string(file) + ":" + std::string(static_cast<std::size_t>(line) * 33000, 'x');
      expected.push_back(content);
      text += content + "\n";
    }
    paths.push_back(dir.write("f" + std::to_string(file) + ".txt", text));
  }
  dpipe::testing::check_battery(
      [&] {
        return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::readlines({}, dpipe::io::lines_only);
      },
      expected, std::nullopt);
}

TEST_CASE("readlines restores inside a file without reading the files before it", "[io]") {
  TextFiles files;
  const std::vector<std::string> paths{files.a, files.b};
  const auto make = [&] { return dpipe::iter::from(paths) | dpipe::io::open_files() | dpipe::io::readlines(); };
  const auto pipe = make();
  (void)dpipe::testing::take(pipe, 6);  // a.txt and the header of b.txt
  const auto blob = dpipe::graph::save_state(pipe);
  fs::remove(files.a);  // nothing reads it again
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  CHECK(dpipe::testing::collect(restored) == std::vector<PathLine>{{files.b, "four"}, {files.b, "five"}});

  SECTION("a file that is shorter than the checkpoint's offset is refused") {
    std::ofstream(files.b, std::ios::binary | std::ios::trunc) << "x";
    try {
      dpipe::graph::load_state(make(), blob);
      FAIL("no StateError");
    } catch (const dpipe::StateError& error) {
      CHECK_THAT(
          error.what(),
          Catch::Matches("readlines#[0-9]+: cannot continue the file the checkpoint was reading: readlines#[0-9]+: '" +
                         files.b + "' byte offset 8: the file has only 1 bytes \\(it changed since the checkpoint\\)"));
    }
  }
}

namespace {

/// What `step()` returns, run by a user without root's right to read every file: in a child
/// process that gave up root (uid and gid 65534, no groups) when this process is root (as CI is,
/// where chmod 000 stops no read), here otherwise.
std::string without_root(const std::function<std::string()>& step) {
  if (::geteuid() != 0) return step();
  std::array<int, 2> channel{};
  REQUIRE(::pipe(channel.data()) == 0);
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {
    ::close(channel[0]);
    std::string result = "cannot give up root";
    if (::setgroups(0, nullptr) == 0 && ::setresgid(65534, 65534, 65534) == 0 &&
        ::setresuid(65534, 65534, 65534) == 0) {
      try {
        result = step();
      } catch (...) {
        result = "an exception other than DataError";
      }
    }
    const auto written = ::write(channel[1], result.data(), result.size());
    ::_exit(written == static_cast<ssize_t>(result.size()) ? 0 : 1);
  }
  ::close(channel[1]);
  std::string result;
  std::array<char, 4096> block{};
  for (ssize_t got = 0; (got = ::read(channel[0], block.data(), block.size())) > 0;)
    result.append(block.data(), static_cast<std::size_t>(got));
  ::close(channel[0]);
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK((WIFEXITED(status) && WEXITSTATUS(status) == 0));
  return result;
}

}  // namespace

TEST_CASE("open_files names a file it may not read", "[io]") {
  TempDir dir;
  const std::string secret = dir.write("secret.txt", "hidden\n");
  fs::permissions(dir.str(), fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec |
                                 fs::perms::others_read | fs::perms::others_exec);
  fs::permissions(secret, fs::perms::none);
  const auto pipe = dpipe::iter::from(std::vector<std::string>{secret}) | dpipe::io::open_files() |
                    dpipe::io::readlines({}, dpipe::io::lines_only);
  CHECK_THAT(without_root([&] { return dpipe::testing::data_error_of(pipe); }),
             Catch::Matches("open_files#[0-9]+: '" + secret + "': cannot open: Permission denied"));
}

TEST_CASE("open_files and readlines raise DataError naming the file and the line or skip and count", "[io]") {
  TempDir dir;
  const std::string good = dir.write("good.txt", "1\n2\n");
  const std::string missing = dir / "missing.txt";
  const std::string long_lines =
      dir.write("long.txt", "ok\n" + std::string(40, 'y') + "\nafter\n" + std::string(50, 'z'));
  const auto make = [&](dpipe::OnError on_error, std::vector<std::string> paths) {
    return dpipe::iter::from(std::move(paths)) | dpipe::io::open_files(on_error) |
           dpipe::io::readlines({.max_line_bytes = 32, .on_error = on_error}, dpipe::io::lines_only);
  };
  SECTION("raise") {
    try {
      (void)dpipe::testing::collect(make({}, {good, missing}));
      FAIL("no DataError");
    } catch (const DataError& error) {
      CHECK_THAT(error.what(),
                 Catch::Matches("open_files#[0-9]+: '" + missing + "': cannot open: No such file or directory"));
      CHECK(error.path() == missing);
      CHECK_FALSE(error.line().has_value());
    }
    try {
      (void)dpipe::testing::collect(make({}, {long_lines}));
      FAIL("no DataError");
    } catch (const DataError& error) {
      CHECK_THAT(error.what(),
                 Catch::Matches("readlines#[0-9]+: '" + long_lines +
                                "' line 2 byte offset 3: the line is longer than max_line_bytes \\(32\\)"));
      CHECK(error.line() == 2);
      CHECK(error.byte_offset() == 3);
    }
    try {
      (void)dpipe::testing::collect(make({}, {dir.str()}));
      FAIL("no DataError");
    } catch (const DataError& error) {
      CHECK_THAT(error.what(),
                 Catch::Matches("open_files#[0-9]+: '" + dir.str() + "': cannot open: it is a directory"));
    }
  }
  SECTION("skip: only the bad file and the bad lines are lost, logged and counted") {
    dpipe::testing::LogCapture log;
    const auto pipe = make(dpipe::OnError::skip(), {missing, long_lines, good});
    dpipe::graph::enable_statistics(pipe.ptr());
    CHECK(dpipe::testing::collect(pipe) == std::vector<std::string>{"ok", "after", "1", "2"});
    const auto rows = dpipe::graph::statistics(pipe.ptr());
    REQUIRE(rows.size() == 3);
    CHECK(rows[0].label.starts_with("readlines#"));
    CHECK(rows[0].skipped == 2);
    CHECK(rows[1].label.starts_with("open_files#"));
    CHECK(rows[1].skipped == 1);
    const auto messages = log.messages();
    REQUIRE(messages.size() == 3);
    CHECK_THAT(messages[0], Catch::Matches("open_files#[0-9]+: '" + missing +
                                           "': cannot open: No such file or directory; skipped \\(1 in this epoch\\)"));
    CHECK_THAT(messages[2], Catch::Matches("readlines#[0-9]+: '" + long_lines +
                                           "' line 4 byte offset 50: the line is longer than max_line_bytes \\(32\\); "
                                           "skipped \\(2 in this epoch\\)"));
  }
  SECTION("skip with a budget: one bad line too many raises ElementError") {
    const auto pipe = dpipe::iter::from(std::vector<std::string>{long_lines}) | dpipe::io::open_files() |
                      dpipe::io::readlines({.max_line_bytes = 32, .on_error = dpipe::OnError::skip(1)});
    CHECK_THROWS_MATCHES(dpipe::testing::collect(pipe), dpipe::ElementError,
                         Catch::Matchers::Predicate<dpipe::ElementError>([](const dpipe::ElementError& error) {
                           return std::string(error.what())
                               .ends_with(
                                   "that is 2 failed elements in this epoch, more than the error budget of 1 "
                                   "(OnError::skip)");
                         }));
  }
}

TEST_CASE("Worker processes and threads read sharded files and restore mid-epoch", "[io][concurrency]") {
  TempDir dir;
  std::vector<std::vector<std::string>> lines_of(8);  // by file, in listing order
  std::vector<std::string> all;
  for (std::size_t file = 0; file < 8; ++file) {
    std::string text;
    for (std::size_t line = 0; line < 5; ++line) {
      lines_of[file].push_back(std::to_string(file * 10 + line));
      text += lines_of[file].back() + "\n";
    }
    all.insert(all.end(), lines_of[file].begin(), lines_of[file].end());
    (void)dir.write("part-" + std::to_string(file) + ".txt", text);
  }
  SECTION("readlines, with the standard battery under two workers") {
    dpipe::testing::check_workers(
        [&] {
          return dpipe::io::list_files(dir.str(), {"*.txt"}) | dpipe::iter::shuffle() | dpipe::iter::sharding_filter() |
                 dpipe::io::open_files() | dpipe::io::readlines({}, dpipe::io::lines_only);
        },
        all);
  }
  SECTION("files are sharded across ranks and workers: instance = worker + 2 * rank") {
    dpipe::testing::check_ranks_and_workers(
        [&] {
          return dpipe::io::list_files(dir.str(), {"*.txt"}) | dpipe::iter::sharding_filter() |
                 dpipe::io::open_files() | dpipe::io::readlines({}, dpipe::io::lines_only);
        },
        [&](std::size_t instance) {
          auto lines = lines_of[instance];
          lines.insert(lines.end(), lines_of[instance + 4].begin(), lines_of[instance + 4].end());
          return lines;
        },
        all);
  }
}
