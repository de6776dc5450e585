// S3Options::from_environment() and the process's S3 settings: the environment variables and the
// shared credentials and config files, read as the AWS CLI and SDKs read them.

#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <string_view>

#include <fmt/core.h>

#include <dpipe/core/error.hpp>
#include <dpipe/io/s3.hpp>

namespace dpipe::io {
namespace {

/// The value of environment variable `name`, or empty.
std::string environment(const char* name) {
  const char* value = std::getenv(name);  // NOLINT(concurrency-mt-unsafe): read, never set, by dpipe
  return value == nullptr ? std::string() : std::string(value);
}

std::string_view trim(std::string_view text) noexcept {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r')) text.remove_suffix(1);
  return text;
}

/// One section of an AWS INI file: its keys and values.
using Section = std::map<std::string, std::string, std::less<>>;

/// Section `name` of the INI file at `path` ("default", "profile x"); empty when the file or the
/// section is missing. InvalidArgument naming the file and line for a line that is neither a
/// section, a "key = value", a comment nor blank. Nested values (the indented lines under
/// "s3 =") are kept as "s3.<key>".
Section read_section(const std::string& path, std::string_view name) {
  Section section;
  std::ifstream file(path);
  if (!file) return section;
  std::string line;
  bool inside = false;
  std::string parent;  // "s3" while reading the indented lines under "s3 ="
  for (std::size_t number = 1; std::getline(file, line); ++number) {
    const bool indented = !line.empty() && (line.front() == ' ' || line.front() == '\t');
    const std::string_view text = trim(line);
    if (text.empty() || text.front() == '#' || text.front() == ';') continue;
    if (text.front() == '[') {
      if (text.back() != ']')
        DPIPE_THROW(InvalidArgument, "S3 settings: {} line {}: a section header without its ']'", path, number);
      inside = trim(text.substr(1, text.size() - 2)) == name;
      parent.clear();
      continue;
    }
    const auto equals = text.find('=');
    if (equals == std::string_view::npos)
      DPIPE_THROW(InvalidArgument, "S3 settings: {} line {}: expected 'key = value'", path, number);
    if (!inside) continue;
    const std::string key(trim(text.substr(0, equals)));
    const std::string value(trim(text.substr(equals + 1)));
    if (indented && !parent.empty()) {
      section[parent + "." + key] = value;
    } else {
      parent = value.empty() ? key : std::string();
      section[key] = value;
    }
  }
  return section;
}

/// The file environment variable `variable` names, else `fallback` under the home directory.
std::string aws_file(const char* variable, std::string_view fallback) {
  std::string path = environment(variable);
  if (!path.empty()) return path;
  const std::string home = environment("HOME");
  return home.empty() ? std::string() : fmt::format("{}/.aws/{}", home, fallback);
}

/// The first non-empty value among `values`.
std::string first_of(std::initializer_list<std::string> values) {
  for (const auto& value : values)
    if (!value.empty()) return value;
  return {};
}

std::string lookup(const Section& section, std::string_view key) {
  const auto found = section.find(key);
  return found == section.end() ? std::string() : found->second;
}

void check(const S3Options& options) {
  if (!options.endpoint.empty() && !options.endpoint.starts_with("http://") &&
      !options.endpoint.starts_with("https://"))
    DPIPE_THROW(InvalidArgument, "S3 settings: the endpoint '{}' is not an http:// or https:// URL", options.endpoint);
  if (options.connect_timeout.count() < 0 || options.retry_delay.count() < 0 || options.max_retry_delay.count() < 0)
    DPIPE_THROW(InvalidArgument, "S3 settings: connect_timeout and the retry delays must not be negative");
  if (options.timeout.count() <= 0)
    DPIPE_THROW(InvalidArgument, "S3 settings: timeout must be positive (a stalled server must end in a retry)");
  if (options.credentials &&
      (options.credentials->access_key_id.empty() || options.credentials->secret_access_key.empty()))
    DPIPE_THROW(InvalidArgument,
                "S3 settings: credentials need an access key id and a secret access key (std::nullopt for "
                "anonymous requests)");
}

/// The process's settings: std::nullopt until first used or set.
struct Settings {
  std::mutex mutex;
  std::optional<S3Options> options;
};

Settings& settings() {
  static Settings instance;
  return instance;
}

}  // namespace

S3Options S3Options::from_environment() {
  S3Options options;
  const std::string profile = first_of({environment("AWS_PROFILE"), environment("AWS_DEFAULT_PROFILE"), "default"});
  const std::string credentials_path = aws_file("AWS_SHARED_CREDENTIALS_FILE", "credentials");
  const std::string config_path = aws_file("AWS_CONFIG_FILE", "config");
  const Section stored = credentials_path.empty() ? Section() : read_section(credentials_path, profile);
  const Section config = config_path.empty()
                             ? Section()
                             : read_section(config_path, profile == "default" ? profile : "profile " + profile);

  if (!environment("AWS_ACCESS_KEY_ID").empty()) {
    options.credentials = S3Credentials{environment("AWS_ACCESS_KEY_ID"), environment("AWS_SECRET_ACCESS_KEY"),
                                        environment("AWS_SESSION_TOKEN")};
    options.credentials_source = "the environment (AWS_ACCESS_KEY_ID)";
  } else {
    for (const auto& [section, path] : {std::pair{&stored, &credentials_path}, std::pair{&config, &config_path}}) {
      const std::string key_id = lookup(*section, "aws_access_key_id");
      if (key_id.empty()) continue;
      options.credentials =
          S3Credentials{key_id, lookup(*section, "aws_secret_access_key"), lookup(*section, "aws_session_token")};
      options.credentials_source = fmt::format("{}, profile '{}'", *path, profile);
      break;
    }
  }
  if (options.credentials && options.credentials->secret_access_key.empty())
    DPIPE_THROW(InvalidArgument, "S3 settings: {} has an access key id but no secret access key",
                options.credentials_source);
  options.region = first_of({environment("AWS_REGION"), environment("AWS_DEFAULT_REGION"), lookup(config, "region")});
  options.endpoint = first_of({environment("AWS_ENDPOINT_URL_S3"), environment("AWS_ENDPOINT_URL"),
                               lookup(config, "s3.endpoint_url"), lookup(config, "endpoint_url")});
  while (options.endpoint.ends_with('/')) options.endpoint.pop_back();
  check(options);
  return options;
}

void set_s3_options(S3Options options) {
  while (options.endpoint.ends_with('/')) options.endpoint.pop_back();
  check(options);
  auto& shared = settings();
  const std::lock_guard lock(shared.mutex);
  shared.options = std::move(options);
}

S3Options s3_options() {
  auto& shared = settings();
  const std::lock_guard lock(shared.mutex);
  if (!shared.options) shared.options = S3Options::from_environment();
  return *shared.options;
}

}  // namespace dpipe::io
