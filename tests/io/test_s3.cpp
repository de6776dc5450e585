// s3:// paths against a real S3-compatible server (s3rver) behind a proxy that checks SigV4
// signatures as AWS does and injects faults (tests/support/s3_server.hpp): listings of more than
// 1000 keys in list_files' order, every format end to end in process and with two workers of
// each kind, checkpoints inside an object, the cache, read-ahead, refusals with S3's own codes,
// resets, SlowDown and stalls, and the settings read from the environment.

#include <algorithm>
#include <array>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include <catch2/catch.hpp>
#include <fmt/core.h>

#include <dpipe/dpipe.hpp>
#include <dpipe/io.hpp>

#include "support/archive_writer.hpp"
#include "support/battery.hpp"
#include "support/data_error.hpp"
#include "support/free_port.hpp"
#include "support/io_workers.hpp"
#include "support/log_capture.hpp"
#include "support/s3_server.hpp"
#include "support/temp_dir.hpp"
#include "support/tfrecord_writer.hpp"

namespace {

namespace fs = std::filesystem;
namespace io = dpipe::io;
namespace iter = dpipe::iter;
using dpipe::testing::collect;
using dpipe::testing::data_error_of;
using dpipe::testing::S3TestServer;
using dpipe::testing::TempDir;
using namespace std::chrono_literals;

/// The server, with the process's S3 settings pointing at its proxy while the fixture lives.
struct S3Fixture {
  S3Fixture() { io::set_s3_options(server.options()); }
  ~S3Fixture() { io::set_s3_options({}); }
  S3Fixture(const S3Fixture&) = delete;
  S3Fixture& operator=(const S3Fixture&) = delete;

  /// Changes the settings: `change(options)` on the proxy's.
  template <class Change>
  void configure(Change change) const {
    auto options = server.options();
    change(options);
    io::set_s3_options(options);
  }

  S3TestServer server;
  TempDir local;
};

/// How many times `text` holds `part`.
std::size_t count_of(const std::string& text, const std::string& part) {
  std::size_t count = 0;
  for (auto at = text.find(part); at != std::string::npos; at = text.find(part, at + part.size())) ++count;
  return count;
}

/// `paths` with the local directory `root` replaced by `url` ("s3://bucket").
std::vector<std::string> as_urls(std::vector<std::string> paths, const std::string& root, const std::string& url) {
  for (auto& path : paths) path = url + path.substr(root.size());
  return paths;
}

/// Lines "<file>:<i>:" padded to make a ~`bytes` object of many lines.
std::string lines_text(int file, std::size_t bytes) {
  std::string text;
  for (int i = 0; text.size() < bytes; ++i)
    text +=
        std::to_string(file) + ":" + std::to_string(i) + ":" + std::string(40, static_cast<char>('a' + i % 26)) + "\n";
  return text;
}

/// Tar shards of WebDataset samples: shard s holds samples "<s><i>" with a .txt and a .cls.
std::vector<std::string> write_shards(const TempDir& dir, int shards, int samples, std::size_t text_bytes) {
  std::vector<std::string> paths;
  for (int shard = 0; shard < shards; ++shard) {
    std::vector<dpipe::testing::ArchiveEntry> members;
    for (int sample = 0; sample < samples; ++sample) {
      const std::string key = std::to_string(shard * 1000 + sample);
      members.emplace_back(key + ".txt", std::string(text_bytes, static_cast<char>('a' + sample % 26)) + key);
      members.emplace_back(key + ".cls", std::to_string(sample % 10));
    }
    const std::string path = dir / ("shards/shard-" + std::to_string(shard) + ".tar");
    fs::create_directories(fs::path(path).parent_path());
    dpipe::testing::write_archive(path, "ustar", "none", members);
    paths.push_back(path);
  }
  return paths;
}

/// A WebDataset sample as "<key after the root>|<suffix>=<bytes>|...".
auto sample_text(std::string root) {
  return [root = std::move(root)](const io::WebDatasetSample& sample) {
    std::string text = sample.key.substr(sample.key.find(root) + root.size());
    for (const auto& [suffix, bytes] : sample.fields) text += "|" + suffix + "=" + bytes;
    return text;
  };
}

/// Sets environment variables for the scope, and restores them.
class ScopedEnvironment {
 public:
  ScopedEnvironment(std::initializer_list<std::pair<const char*, const char*>> values) {
    for (const char* name : kNames) {
      const char* old = std::getenv(name);
      saved_.emplace_back(name, old == nullptr ? std::nullopt : std::optional<std::string>(old));
      ::unsetenv(name);
    }
    for (const auto& [name, value] : values) ::setenv(name, value, 1);
  }
  ~ScopedEnvironment() {
    for (const auto& [name, value] : saved_) {
      if (value) {
        ::setenv(name, value->c_str(), 1);
      } else {
        ::unsetenv(name);
      }
    }
  }
  ScopedEnvironment(const ScopedEnvironment&) = delete;
  ScopedEnvironment& operator=(const ScopedEnvironment&) = delete;

 private:
  static constexpr std::array kNames{
      "AWS_ACCESS_KEY_ID",   "AWS_SECRET_ACCESS_KEY",       "AWS_SESSION_TOKEN", "AWS_PROFILE",
      "AWS_DEFAULT_PROFILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_CONFIG_FILE",   "AWS_REGION",
      "AWS_DEFAULT_REGION",  "AWS_ENDPOINT_URL_S3",         "AWS_ENDPOINT_URL",  "HOME"};
  std::vector<std::pair<const char*, std::optional<std::string>>> saved_;
};

}  // namespace

TEST_CASE("s3 listings page past 1000 keys and keep list_files' order and masks", "[io][s3]") {
  S3Fixture s3;
  for (int i = 0; i < 1040; ++i) (void)s3.local.write("many/f" + std::to_string(1039 - i) + ".txt", "x");
  for (const char* name :
       {"many/a/x.txt", "many/a/b/y.txt", "many/a-b.txt", "many/a.bin", "many/z/w.bin", "many/z/v.txt", "many/b.txt"})
    (void)s3.local.write(name, name);
  s3.server.upload("lists", s3.local.str());
  const std::string local = s3.local / "many";
  for (const bool recursive : {false, true}) {
    for (const std::vector<std::string>& masks : {std::vector<std::string>{}, std::vector<std::string>{"*.txt"}}) {
      INFO("recursive " << recursive << ", " << masks.size() << " masks");
      const auto expected =
          as_urls(collect(io::list_files(local, masks, {.recursive = recursive})), s3.local.str(), "s3://lists");
      CHECK(expected.size() > 1000);
      CHECK(collect(io::list_files("s3://lists/many", masks, {.recursive = recursive})) == expected);
      CHECK(collect(io::list_files("s3://lists/many/", masks, {.recursive = recursive})) == expected);
    }
  }
  const auto log = s3.server.log();
  CHECK(count_of(log, "continuation-token=") == 8);  // a second page in each of the 8 listings
  CHECK(count_of(log, "x-amz-content-sha256") > 8);  // signed, and the proxy checked each one
  CHECK(count_of(log, "\"status\":403") == 0);

  // A directory holding only directories lists nothing without `recursive`, as a local one does.
  (void)s3.local.write("nested/only/deeper/x.txt", "x");
  s3.server.upload("nested", s3.local / "nested");
  CHECK(collect(io::list_files(s3.local / "nested")).empty());
  CHECK(collect(io::list_files("s3://nested/only")).empty());
  CHECK(collect(io::list_files("s3://nested/only", {}, {.recursive = true})) ==
        std::vector<std::string>{"s3://nested/only/deeper/x.txt"});
  CHECK(collect(io::list_files("s3://nested", {}, {.recursive = true})) ==
        std::vector<std::string>{"s3://nested/only/deeper/x.txt"});

  // Keys with spaces, '+', '%', '=' and UTF-8 are listed, signed and read as they are.
  const std::vector<std::string> odd{"odd/a b+c.txt", "odd/100%=x.txt", "odd/\xc3\xa9t\xc3\xa9.txt"};
  TempDir odd_files;
  for (const auto& name : odd) (void)odd_files.write(name, name + "\n");
  s3.server.upload("lists", odd_files.str());
  const auto odd_urls = collect(io::list_files("s3://lists/odd"));
  CHECK(odd_urls == std::vector<std::string>{"s3://lists/odd/100%=x.txt", "s3://lists/odd/a b+c.txt",
                                             "s3://lists/odd/\xc3\xa9t\xc3\xa9.txt"});
  CHECK(collect(io::list_files("s3://lists/odd") | io::open_files() | io::readlines({}, io::lines_only)) ==
        std::vector<std::string>{"odd/100%=x.txt", "odd/a b+c.txt", "odd/\xc3\xa9t\xc3\xa9.txt"});
  CHECK(count_of(s3.server.log(), "\"status\":403") == 0);

  // A root that is an object lists itself; a root that is nothing is an error.
  CHECK(collect(io::list_files("s3://lists/many/a.bin")) == std::vector<std::string>{"s3://lists/many/a.bin"});
  CHECK(collect(io::list_files("s3://lists/many/a.bin", {"*.txt"})).empty());
  const auto missing = io::list_files("s3://lists/nothing");
  CHECK(data_error_of(missing) ==
        missing.node().label() + ": 's3://lists/nothing': cannot list: no object has this key and none is under it");
  const auto no_bucket = io::list_files("s3://no-such-bucket/x/");
  CHECK(data_error_of(no_bucket) == no_bucket.node().label() +
                                        ": 's3://no-such-bucket/x/': cannot list: HTTP status 404, NoSuchBucket: The "
                                        "specified bucket does not exist");
}

TEST_CASE("s3 virtual-hosted addressing names the bucket in the host and signs it", "[io][s3]") {
  S3Fixture s3;
  (void)s3.local.write("v/a.txt", "virtual\n");
  (void)s3.local.write("v/b c.txt", "hosted\n");
  s3.server.upload("vhost-bucket", s3.local.str());
  s3.configure([&](io::S3Options& options) {
    options.endpoint = s3.server.proxy_endpoint("s3.localhost");
    options.addressing = io::S3Addressing::virtual_hosted;
  });
  CHECK(collect(io::list_files("s3://vhost-bucket/v")) ==
        std::vector<std::string>{"s3://vhost-bucket/v/a.txt", "s3://vhost-bucket/v/b c.txt"});
  CHECK(collect(io::list_files("s3://vhost-bucket/v") | io::open_files() | io::readlines({}, io::lines_only)) ==
        std::vector<std::string>{"virtual", "hosted"});
  const auto log = s3.server.log();
  INFO(log);
  CHECK(count_of(log, "\"url\":\"/?delimiter=%2F&list-type=2&prefix=v%2F\"") == 2);  // the bucket is in the host
  CHECK(count_of(log, "\"url\":\"/v/a.txt\"") == 1);
  CHECK(count_of(log, "\"url\":\"/v/b%20c.txt\"") == 1);
  CHECK(count_of(log, "\"status\":403") == 0);
}

TEST_CASE("s3 objects go through every format as local files do in process and in two workers", "[io][s3]") {
  S3Fixture s3;
  const std::string lines = lines_text(0, 300000);
  const std::vector<std::pair<std::string, std::string>> objects{
      {"formats/a.txt", lines},
      {"formats/a2.txt", lines_text(1, 100000)},
      {"formats/b.csv", "id,name\n1,one\n2,\"two, quoted\"\n3,three\n4,four\n5,\"five\nlines\"\n"},
      {"formats/c.jsonl", "{\"a\": 1}\n{\"a\": [2, 3]}\n{\"b\": \"x\"}\n[4]\n\"five\"\n"},
      {"formats/part-08.txt", "8\n"},
      {"formats/part-09.txt", "9\n"},
      {"formats/part-10.txt", "10\n"},
      {"formats/d.tfrecord", dpipe::testing::frames({"alpha", std::string(200000, 'r'), "", "omega"})}};
  for (const auto& [name, bytes] : objects) (void)s3.local.write(name, bytes);
  dpipe::testing::write_archive(s3.local / "formats/e.tar.gz", "ustar", "gzip",
                                {{"m/1.txt", "one"},
                                 {"m/2.txt", lines},
                                 {"m/3.txt", "three"},
                                 {"m/4.txt", lines.substr(0, 70000)},
                                 {"m/5.txt", ""}});
  s3.server.upload("data", s3.local.str());
  // Each format: the elements of the local files (in process) are those of the objects, in process
  // and through two worker processes and two worker threads (restored at {0, 1, 4, end} too).
  const auto check = [&](const std::vector<std::string>& names, const auto& read, const auto& project) {
    std::vector<std::string> local;
    std::vector<std::string> remote;
    for (const auto& name : names) {
      local.push_back(s3.local / name);
      remote.push_back("s3://data/" + name);
    }
    const auto paths = [&](const std::vector<std::string>& of) {
      return read(iter::from(of) | iter::shuffle() | iter::sharding_filter() | io::open_files());
    };
    using Element = typename decltype(paths(local))::value_type;
    std::vector<std::invoke_result_t<decltype(project), const Element&>> expected;
    for (const auto& element : read(iter::from(local) | io::open_files())) expected.push_back(project(element));
    REQUIRE(!expected.empty());
    decltype(expected) in_process;
    for (const auto& element : read(iter::from(remote) | io::open_files())) in_process.push_back(project(element));
    CHECK(in_process == expected);
    dpipe::testing::check_workers([&] { return paths(remote); }, expected, project);
  };
  const auto same = [](const auto& element) { return element; };
  const auto by_name = [](const io::PathBytes& member) {  // named by its part after the root
    return std::pair{member.first.substr(member.first.find("formats/")), member.second};
  };
  SECTION("lines") {
    check(
        {"formats/a.txt", "formats/a2.txt"},
        [](const auto& files) { return files | io::readlines({}, io::lines_only); }, same);
  }
  SECTION("csv") {
    check(
        {"formats/b.csv"}, [](const auto& files) { return files | io::parse_csv(); }, same);
  }
  SECTION("json lines") {
    check(
        {"formats/c.jsonl"}, [](const auto& files) { return files | io::parse_jsonl(); },
        [](const io::Json& value) { return value.dump(); });
  }
  SECTION("tfrecord") {
    check(
        {"formats/d.tfrecord"}, [](const auto& files) { return files | io::tfrecord_records(); }, same);
  }
  SECTION("gzip tar") {
    check(
        {"formats/e.tar.gz"}, [](const auto& files) { return files | io::decompress() | io::load_from_tar(); },
        by_name);
  }
  // shard_expand names objects as it names files, and they open.
  const auto expanded =
      iter::from(std::vector<std::string>{"s3://data/formats/part-{08..10}.txt"}) | io::shard_expand();
  CHECK(collect(expanded) == std::vector<std::string>{"s3://data/formats/part-08.txt", "s3://data/formats/part-09.txt",
                                                      "s3://data/formats/part-10.txt"});
  CHECK(collect(expanded | io::open_files() | io::readlines({}, io::lines_only)) ==
        std::vector<std::string>{"8", "9", "10"});
}

TEST_CASE("s3 WebDataset shards and TFRecord files load with two worker processes and two worker threads",
          "[io][s3][concurrency]") {
  S3Fixture s3;
  const auto shard_paths = write_shards(s3.local, 4, 6, 3000);
  std::vector<std::string> records_expected;
  for (int file = 0; file < 3; ++file) {
    std::vector<std::string> records;
    for (int record = 0; record < 5; ++record)
      records.push_back(std::to_string(file) + ":" + std::string(static_cast<std::size_t>(record) * 20000, 'r'));
    records_expected.insert(records_expected.end(), records.begin(), records.end());
    (void)s3.local.write("records/r" + std::to_string(file) + ".tfrecord", dpipe::testing::frames(records));
  }
  s3.server.upload("data", s3.local.str());
  const auto shards = as_urls(shard_paths, s3.local.str(), "s3://data");
  const auto samples = [&](const std::vector<std::string>& paths, io::OpenFilesOptions open) {
    return iter::from(paths) | iter::shuffle() | iter::sharding_filter() | io::open_files(open) | io::load_from_tar() |
           io::webdataset();
  };
  const auto project = sample_text("shards/");
  std::vector<std::string> expected;
  for (const auto& sample : collect(samples(shard_paths, {}))) expected.push_back(project(sample));
  REQUIRE(expected.size() == 24);
  for (const std::size_t ahead : {std::size_t{0}, std::size_t{2}}) {
    INFO("read_ahead " << ahead);
    dpipe::testing::check_workers([&] { return samples(shards, {.read_ahead = ahead}); }, expected, project);
  }
  const auto records = [&] {
    return io::list_files("s3://data/records", {"*.tfrecord"}) | iter::sharding_filter() | io::open_files() |
           io::tfrecord_records();
  };
  dpipe::testing::check_workers(records, records_expected);
}

TEST_CASE("s3 open_files with read-ahead runs the standard battery and saves the streams opened ahead",
          "[io][s3][concurrency]") {
  S3Fixture s3;
  std::vector<std::string> expected;
  std::vector<std::string> urls;
  for (int file = 0; file < 5; ++file) {
    const std::string text = lines_text(file, 20000 + 5000 * static_cast<std::size_t>(file));
    (void)s3.local.write("ahead/p" + std::to_string(file) + ".txt", text);
    for (std::size_t begin = 0; begin < text.size();) {
      const auto end = text.find('\n', begin);
      expected.push_back(text.substr(begin, end - begin));
      begin = end + 1;
    }
    urls.push_back("s3://data/ahead/p" + std::to_string(file) + ".txt");
  }
  s3.server.upload("data", s3.local.str());
  const auto make = [&] {
    return iter::from(urls) | io::open_files({.read_ahead = 3, .read_ahead_bytes = 30000}) |
           io::readlines({}, io::lines_only);
  };
  dpipe::testing::check_battery(make, expected, std::nullopt);
  CHECK(io::AheadFileOpener(iter::from(urls), {.read_ahead = 3, .read_ahead_bytes = 30000}).settings() ==
        dpipe::NodeSettings{{"read_ahead", "3"}, {"read_ahead_bytes", "30000"}});
  // A missing object among them is raised at its turn, or skipped.
  std::vector<std::string> with_missing = urls;
  with_missing.insert(with_missing.begin() + 1, "s3://data/ahead/missing.txt");
  const auto skipping = iter::from(with_missing) |
                        io::open_files({.on_error = dpipe::OnError::skip(), .read_ahead = 2}) |
                        io::readlines({}, io::lines_only);
  CHECK(collect(skipping) == expected);
  const auto raising = iter::from(with_missing) | io::open_files({.read_ahead = 2});
  CHECK(data_error_of(raising) == raising.node().label() +
                                      ": 's3://data/ahead/missing.txt': cannot open: HTTP status 404, NoSuchKey: The "
                                      "specified key does not exist.");
  CHECK_THROWS_WITH(io::AheadFileOpener(iter::from(urls), {}), "open_files: read_ahead must be positive here");
}

TEST_CASE("s3 restores a checkpoint inside an object with a byte-range GET", "[io][s3]") {
  S3Fixture s3;
  const std::string text = lines_text(7, 2 << 20);
  (void)s3.local.write("big/lines.txt", text);
  s3.server.upload("data", s3.local.str());
  const auto make = [] {
    return iter::from(std::vector<std::string>{"s3://data/big/lines.txt"}) | io::open_files() |
           io::readlines({}, io::lines_only);
  };
  const auto all = collect(make());
  SECTION("a checkpoint at the end of the object and one in it hold no secret") {
    const auto done = make();
    CHECK(dpipe::testing::take(done, all.size()).size() == all.size());
    const auto end_blob = dpipe::graph::save_state(done);
    const std::string bytes(reinterpret_cast<const char*>(end_blob.data()), end_blob.size());
    CHECK(bytes.find(S3TestServer::kSecret) == std::string::npos);
    s3.server.clear();
    const auto restored = make();
    dpipe::graph::load_state(restored, end_blob);
    CHECK(collect(restored).empty());
    CHECK(count_of(s3.server.log(), "\"method\":\"GET\"") == 0);  // nothing left to ask for
  }
  SECTION("through the cache, a restore reads the cached copy") {
    TempDir cache;
    s3.configure([&](io::S3Options& options) { options.cache = {.directory = cache.str()}; });
    const auto pipe = make();
    (void)dpipe::testing::take(pipe, 30000);
    const auto blob = dpipe::graph::save_state(pipe);
    s3.server.clear();
    const auto restored = make();
    dpipe::graph::load_state(restored, blob);
    CHECK(collect(restored) == std::vector<std::string>(all.begin() + 30000, all.end()));
    CHECK(count_of(s3.server.log(), "\"method\":\"GET\"") == 0);
    s3.configure([](io::S3Options&) {});  // no cache for the rest
  }
  const auto pipe = make();
  (void)dpipe::testing::take(pipe, 20000);
  const auto blob = dpipe::graph::save_state(pipe);
  s3.server.clear();
  const auto restored = make();
  dpipe::graph::load_state(restored, blob);
  CHECK(collect(restored) == std::vector<std::string>(all.begin() + 20000, all.end()));
  const auto log = s3.server.log();
  INFO(log);
  CHECK(count_of(log, "\"method\":\"GET\"") == 1);  // the rest of the object, once
  CHECK(count_of(log, "\"range\":\"bytes=") == 1);
  CHECK(count_of(log, "\"range\":\"bytes=0-\"") == 0);

  // An object replaced since the checkpoint (same size, other bytes) is refused, never mixed.
  TempDir changed;
  std::string other = text;
  other[0] = 'X';
  (void)changed.write("big/lines.txt", other);
  s3.server.upload("data", changed.str());
  const auto stale = make();
  const std::string label = stale.node().label();
  CHECK_THROWS_WITH(
      dpipe::graph::load_state(stale, blob),
      Catch::Matchers::StartsWith(label + ": cannot continue the file the checkpoint was reading: " + label +
                                  ": 's3://data/big/lines.txt' byte offset ") &&
          Catch::Matchers::Contains(
              ": HTTP status 412, PreconditionFailed: At least one of the pre-conditions you specified did "
              "not hold (the object changed since it was first read, when its ETag was \"") &&
          Catch::Matchers::EndsWith("\")"));
}

TEST_CASE("s3 refusals fail at once with S3's code and message and never show the secret", "[io][s3]") {
  S3Fixture s3;
  (void)s3.local.write("a.txt", "hello\n");
  s3.server.upload("data", s3.local.str());
  dpipe::testing::LogCapture logs;
  const auto open = [] { return iter::from(std::vector<std::string>{"s3://data/a.txt"}) | io::open_files(); };
  {
    const auto pipe = iter::from(std::vector<std::string>{"s3://data/missing.txt"}) | io::open_files();
    CHECK(data_error_of(pipe) == pipe.node().label() +
                                     ": 's3://data/missing.txt': cannot open: HTTP status 404, NoSuchKey: The "
                                     "specified key does not exist.");
  }
  s3.configure([](io::S3Options& options) { options.credentials->secret_access_key = "wrong-secret-1234"; });
  {
    const auto pipe = open();
    CHECK(data_error_of(pipe) ==
          pipe.node().label() +
              ": 's3://data/a.txt': cannot open: HTTP status 403, SignatureDoesNotMatch: The request signature we "
              "calculated does not match the signature you provided. Check your key and signing method.");
  }
  s3.configure([](io::S3Options& options) {
    options.credentials = io::S3Credentials{"nobody", "wrong-secret-1234"};
    options.credentials_source = "the test";
  });
  {
    const auto pipe = open();
    CHECK(data_error_of(pipe) ==
          pipe.node().label() +
              ": 's3://data/a.txt': cannot open: HTTP status 403, InvalidAccessKeyId: The AWS Access Key Id you "
              "provided does not exist in our records. (signed with the credentials from the test)");
  }
  for (const auto& message : logs.messages()) CHECK(message.find("wrong-secret-1234") == std::string::npos);
  // Anonymous requests reach a public bucket (s3rver's are), signed ones are checked.
  s3.configure([](io::S3Options& options) { options.credentials.reset(); });
  CHECK(collect(open() | io::readlines({}, io::lines_only)) == std::vector<std::string>{"hello"});
}

TEST_CASE("s3 reads through resets SlowDown and stalls and gives up with a clear DataError", "[io][s3]") {
  S3Fixture s3;
  const std::string text = lines_text(3, 1 << 20);
  (void)s3.local.write("faults/f.txt", text);
  s3.server.upload("data", s3.local.str());
  const auto read = [] {
    auto files = collect(iter::from(std::vector<std::string>{"s3://data/faults/f.txt"}) | io::open_files());
    std::string bytes;
    std::vector<char> buffer(1 << 16);
    while (const auto got = files.at(0).read(buffer.data(), buffer.size(), "test")) bytes.append(buffer.data(), got);
    return bytes;
  };
  dpipe::testing::LogCapture logs;
  SECTION("a connection reset mid-object resumes at the byte reached") {
    s3.server.fault(R"({"mode": "reset", "after_bytes": 300000, "times": 2})");
    CHECK(read() == text);
    const auto log = s3.server.log();
    INFO(log);
    CHECK(count_of(log, "\"fault\":\"reset\"") == 2);
    CHECK(count_of(log, "\"range\":\"bytes=") == 2);  // the two resumptions
    CHECK(count_of(log, "\"method\":\"GET\"") == 3);
    const auto messages = logs.messages();
    CHECK(std::count_if(messages.begin(), messages.end(), [](const std::string& message) {
            return message.find("s3: GET s3://data/faults/f.txt broke at byte ") == 0 &&
                   message.find("; retry 1 of 5 in ") != std::string::npos;
          }) == 2);
  }
  SECTION("503 SlowDown and 500 are retried") {
    s3.server.fault(R"({"mode": "slowdown", "times": 2})");
    s3.server.fault(R"({"mode": "internal", "times": 1})");
    CHECK(read() == text);
    const auto messages = logs.messages();
    CHECK(std::count_if(messages.begin(), messages.end(), [](const std::string& message) {
            return message.find("HTTP status 503, SlowDown: Please reduce your request rate.; retry ") !=
                   std::string::npos;
          }) == 2);
  }
  SECTION("a response that stalls past the timeout is retried from the byte reached") {
    s3.configure([](io::S3Options& options) { options.timeout = 300ms; });
    s3.server.fault(R"({"mode": "stall", "after_bytes": 100000, "times": 1})");
    s3.server.fault(R"({"mode": "stall_headers", "times": 1})");
    CHECK(read() == text);
    const auto log = s3.server.log();
    INFO(log);
    // After the stall, and again after no answer (a loaded machine may add others, at other bytes).
    CHECK(count_of(log, "\"range\":\"bytes=100000-\"") == 2);
  }
  SECTION("SlowDown past the retries is a DataError with S3's code and message") {
    s3.configure([](io::S3Options& options) { options.retries = 2; });
    s3.server.fault(R"({"mode": "slowdown", "times": 100})");
    const auto pipe = iter::from(std::vector<std::string>{"s3://data/faults/f.txt"}) | io::open_files();
    CHECK(data_error_of(pipe) == pipe.node().label() +
                                     ": 's3://data/faults/f.txt': cannot open: HTTP status 503, SlowDown: Please "
                                     "reduce your request rate. (gave up after 3 attempts)");
  }
  SECTION("a stall past the retries mid-object is a DataError at the byte reached") {
    s3.configure([](io::S3Options& options) {
      options.retries = 1;
      options.timeout = 200ms;
    });
    // Each retry counts from the last byte received: the retries run out only without progress.
    s3.server.fault(R"({"mode": "stall", "after_bytes": 65536, "times": 1})");
    s3.server.fault(R"({"mode": "stall", "after_bytes": 0, "times": 100})");
    CHECK_THROWS_WITH(read(),
                      Catch::Matchers::StartsWith("test: 's3://data/faults/f.txt' byte offset ") &&
                          Catch::Matchers::EndsWith("no data from the server for 200 ms (gave up after 2 attempts)"));
  }
}

TEST_CASE("s3 retries a refused connection and then names the URL and libcurl's reason", "[io][s3]") {
  dpipe::testing::LogCapture logs;
  io::S3Options options;
  options.endpoint = "http://127.0.0.1:" + std::to_string(dpipe::testing::free_port());  // nobody listens
  options.credentials = io::S3Credentials{"key", "secret-5678"};
  options.retries = 2;
  options.retry_delay = 1ms;
  io::set_s3_options(options);
  const auto pipe = iter::from(std::vector<std::string>{"s3://data/a.txt"}) | io::open_files();
  const std::string error = data_error_of(pipe);
  io::set_s3_options({});
  CHECK_THAT(error, Catch::Matchers::StartsWith(pipe.node().label() +
                                                ": 's3://data/a.txt': cannot open: Couldn't connect to server: ") &&
                        Catch::Matchers::EndsWith(" (gave up after 3 attempts)"));
  const auto messages = logs.messages();
  CHECK(std::count_if(messages.begin(), messages.end(), [](const std::string& message) {
          return message.starts_with("s3: GET s3://data/a.txt: Couldn't connect to server: ");
        }) == 2);
  for (const auto& message : messages) CHECK(message.find("secret-5678") == std::string::npos);
  CHECK(error.find("secret-5678") == std::string::npos);
}

TEST_CASE("s3 cache downloads each object once and serves the second epoch from disk", "[io][s3][concurrency]") {
  S3Fixture s3;
  const auto shard_paths = write_shards(s3.local, 4, 5, 20000);
  s3.server.upload("data", s3.local.str());
  TempDir cache;
  const auto shard_bytes = fs::file_size(shard_paths[0]);
  s3.configure([&](io::S3Options& options) { options.cache = {.directory = cache.str(), .max_bytes = 100 << 20}; });
  const auto project = sample_text("shards/");
  std::vector<std::string> expected;
  for (const auto& sample :
       collect(iter::from(shard_paths) | io::open_files() | io::load_from_tar() | io::webdataset()))
    expected.push_back(project(sample));
  const auto pipeline = [] {
    return io::list_files("s3://data/shards") | iter::sharding_filter() | io::open_files({.read_ahead = 2}) |
           io::load_from_tar() | io::webdataset();
  };
  const auto entries = [&] {
    std::vector<fs::path> found;
    for (const auto& entry : fs::directory_iterator(cache.str()))
      if (entry.path().extension() == ".object") found.push_back(entry.path());
    return found;
  };
  SECTION("two epochs with two worker processes") {
    dpipe::DataLoader2<io::WebDatasetSample> loader(pipeline(), dpipe::testing::workers(2));
    CHECK(dpipe::testing::sorted(dpipe::testing::epoch(loader, project)) == dpipe::testing::sorted(expected));
    CHECK(count_of(s3.server.log(), "\"method\":\"GET\",\"url\":\"/data/shards/") == 4);
    CHECK(entries().size() == 4);
    s3.server.clear();
    CHECK(dpipe::testing::sorted(dpipe::testing::epoch(loader, project)) == dpipe::testing::sorted(expected));
    const auto log = s3.server.log();
    CHECK(count_of(log, "/data/shards/") == 0);  // only listings: the objects came from the disk
    CHECK(count_of(log, "list-type=2") == 2);
  }
  SECTION("workers that read the same objects download each once") {
    const auto everything = [] {
      return io::list_files("s3://data/shards") | io::open_files() | io::load_from_tar() | io::webdataset();
    };
    dpipe::DataLoader2<io::WebDatasetSample> loader(everything(), dpipe::testing::workers(2));
    auto twice = expected;
    twice.insert(twice.end(), expected.begin(), expected.end());
    CHECK(dpipe::testing::sorted(dpipe::testing::epoch(loader, project)) == dpipe::testing::sorted(twice));
    CHECK(count_of(s3.server.log(), "\"method\":\"GET\",\"url\":\"/data/shards/") == 4);
  }
  SECTION("the least recently used objects go beyond max_bytes") {
    s3.configure(
        [&](io::S3Options& options) { options.cache = {.directory = cache.str(), .max_bytes = shard_bytes * 5 / 2}; });
    const auto in_order = [] {  // no read-ahead: the objects are used in order
      return io::list_files("s3://data/shards") | io::open_files() | io::load_from_tar() | io::webdataset();
    };
    CHECK(collect(in_order()).size() == expected.size());
    CHECK(entries().size() == 2);
    s3.server.clear();
    // The last two shards are cached; the first is fetched again.
    const auto members_of = [](const std::string& url) {
      return collect(iter::from(std::vector<std::string>{url}) | io::open_files() | io::load_from_tar()).size();
    };
    CHECK(members_of("s3://data/shards/shard-3.tar") == 10);
    CHECK(members_of("s3://data/shards/shard-2.tar") == 10);
    CHECK(count_of(s3.server.log(), "\"method\":\"GET\"") == 0);
    CHECK(members_of("s3://data/shards/shard-0.tar") == 10);
    CHECK(count_of(s3.server.log(), "\"method\":\"GET\",\"url\":\"/data/shards/shard-0.tar\"") == 1);
  }
  SECTION("a download whose bytes are not the ETag's MD5 is refused and leaves nothing behind") {
    s3.server.fault(R"({"mode": "corrupt", "after_bytes": 5000, "times": 1})");
    const auto pipe = iter::from(std::vector<std::string>{"s3://data/shards/shard-1.tar"}) | io::open_files();
    CHECK_THAT(data_error_of(pipe),
               Catch::Matchers::StartsWith(pipe.node().label() + ": 's3://data/shards/shard-1.tar': cannot cache: the "
                                                                 "downloaded bytes' MD5 is ") &&
                   Catch::Matchers::Contains(", the object's ETag \""));
    CHECK(entries().empty());
    for (const auto& file : fs::directory_iterator(cache.str())) CHECK(file.path().extension() != ".tmp");
    CHECK(collect(pipe).size() == 1);  // the next download is whole
  }
  SECTION("a corrupt entry is dropped and fetched again") {
    CHECK(collect(pipeline()).size() == expected.size());
    for (const auto& entry : entries()) fs::resize_file(entry, 1000);
    s3.server.clear();
    dpipe::testing::LogCapture logs;
    std::vector<std::string> again;
    for (const auto& sample : collect(pipeline())) again.push_back(project(sample));
    CHECK(again == expected);
    CHECK(count_of(s3.server.log(), "\"method\":\"GET\",\"url\":\"/data/shards/") == 4);
    const auto messages = logs.messages();
    CHECK(std::count_if(messages.begin(), messages.end(), [&](const std::string& message) {
            return message.find("s3 cache: s3://data/shards/shard-") == 0 &&
                   message.find(fmt::format(": the cached copy has 1000 bytes, the object {}; fetching it again",
                                            shard_bytes)) != std::string::npos;
          }) == 4);
  }
}

TEST_CASE("S3Options reads the environment and the AWS files as the AWS tools do", "[io][s3]") {
  TempDir dir;
  const std::string credentials = dir.write("credentials",
                                            "[default]\naws_access_key_id = DEFAULTKEY\naws_secret_access_key = "
                                            "defaultsecret\n\n[work]\naws_access_key_id=WORKKEY\n"
                                            "aws_secret_access_key=worksecret\naws_session_token=worktoken\n");
  const std::string config = dir.write("config",
                                       "[default]\nregion = eu-west-1\n# a comment\n[profile work]\nregion = "
                                       "ap-south-1\nservices = x\ns3 =\n  endpoint_url = http://127.0.0.1:9000\n");
  {
    ScopedEnvironment environment{{"AWS_SHARED_CREDENTIALS_FILE", credentials.c_str()},
                                  {"AWS_CONFIG_FILE", config.c_str()}};
    const auto options = io::S3Options::from_environment();
    REQUIRE(options.credentials);
    CHECK(options.credentials->access_key_id == "DEFAULTKEY");
    CHECK(options.credentials->secret_access_key == "defaultsecret");
    CHECK(options.credentials_source == credentials + ", profile 'default'");
    CHECK(options.region == "eu-west-1");
    CHECK(options.endpoint.empty());
  }
  {
    ScopedEnvironment environment{{"AWS_SHARED_CREDENTIALS_FILE", credentials.c_str()},
                                  {"AWS_CONFIG_FILE", config.c_str()},
                                  {"AWS_PROFILE", "work"}};
    const auto options = io::S3Options::from_environment();
    REQUIRE(options.credentials);
    CHECK(options.credentials->access_key_id == "WORKKEY");
    CHECK(options.credentials->session_token == "worktoken");
    CHECK(options.region == "ap-south-1");
    CHECK(options.endpoint == "http://127.0.0.1:9000");
  }
  {
    ScopedEnvironment environment{{"AWS_SHARED_CREDENTIALS_FILE", credentials.c_str()},
                                  {"AWS_CONFIG_FILE", config.c_str()},
                                  {"AWS_ACCESS_KEY_ID", "ENVKEY"},
                                  {"AWS_SECRET_ACCESS_KEY", "envsecret"},
                                  {"AWS_REGION", "us-west-2"},
                                  {"AWS_DEFAULT_REGION", "us-east-2"},
                                  {"AWS_ENDPOINT_URL", "http://localhost:1"},
                                  {"AWS_ENDPOINT_URL_S3", "http://localhost:2/"}};
    const auto options = io::S3Options::from_environment();
    REQUIRE(options.credentials);
    CHECK(options.credentials->access_key_id == "ENVKEY");
    CHECK(options.credentials->session_token.empty());
    CHECK(options.credentials_source == "the environment (AWS_ACCESS_KEY_ID)");
    CHECK(options.region == "us-west-2");
    CHECK(options.endpoint == "http://localhost:2");
  }
  {
    ScopedEnvironment environment{{"HOME", dir.str().c_str()}};
    const auto options = io::S3Options::from_environment();
    CHECK_FALSE(options.credentials);  // anonymous
    CHECK(options.region.empty());
  }
  {
    const std::string broken = dir.write("broken", "[default]\naws_access_key_id\n");
    ScopedEnvironment environment{{"AWS_SHARED_CREDENTIALS_FILE", broken.c_str()}, {"HOME", dir.str().c_str()}};
    CHECK_THROWS_WITH(io::S3Options::from_environment(), "S3 settings: " + broken + " line 2: expected 'key = value'");
  }
  CHECK_THROWS_WITH(io::set_s3_options({.endpoint = "127.0.0.1:9000"}),
                    "S3 settings: the endpoint '127.0.0.1:9000' is not an http:// or https:// URL");
  CHECK_THROWS_WITH(io::set_s3_options({.credentials = io::S3Credentials{"key", ""}}),
                    "S3 settings: credentials need an access key id and a secret access key (std::nullopt for "
                    "anonymous requests)");
  CHECK_THROWS_WITH(io::set_s3_options({.connect_timeout = -1ms}),
                    "S3 settings: connect_timeout and the retry delays must not be negative");
  CHECK_THROWS_WITH(io::set_s3_options({.timeout = 0ms}),
                    "S3 settings: timeout must be positive (a stalled server must end in a retry)");
}
