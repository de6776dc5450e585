#include <utility>

#include <dpipe/core/error.hpp>
#include <dpipe/io/read_from_http.hpp>

#include "io/http_source.hpp"
#include "io/opener_registry.hpp"

namespace dpipe::io {

OpenedFile open_http(const std::string& url, const HttpOptions& options, std::string_view node) {
  auto source = std::make_unique<detail::HttpSource>(url, options);
  try {
    (void)source->start(0);
  } catch (const SourceFailure& failure) {
    throw DataError(node, {.path = url}, failure.what());
  }
  std::string origin = detail::http_origin(url, options, source->length());
  return {url, std::move(origin), std::move(source)};
}

namespace detail {

void add_http_openers(const AddOpener& add) {
  // read_from_http()'s origins, and URLs given as paths, with the default options.
  const auto open = [](const std::string& origin, std::string_view node) {
    if (!origin.starts_with("http[")) return open_http(origin, {}, node);
    auto file = reopen_http(origin);
    if (!file) throw malformed_origin(origin, "http", node);
    return std::move(*file);
  };
  add("http", open);
  add("https", open);
}

}  // namespace detail

HttpReader::HttpReader(const IterPipe<std::string>& urls, HttpOptions options)
    : EachInput(kName, urls, options.on_error), options_(std::move(options)) {
  if (options_.connect_timeout.count() < 0 || options_.timeout.count() < 0 || options_.retry_delay.count() < 0)
    DPIPE_THROW(InvalidArgument, "read_from_http: connect_timeout, timeout and retry_delay must not be negative");
}

NodeSettings HttpReader::settings() const {
  std::string header_names;
  for (const auto& header : options_.headers) {
    if (!header_names.empty()) header_names += ' ';
    header_names += header.substr(0, header.find(':'));  // the names only: values may be secrets
  }
  return {{"connect_timeout_ms", std::to_string(options_.connect_timeout.count())},
          {"timeout_ms", std::to_string(options_.timeout.count())},
          {"retries", std::to_string(options_.retries)},
          {"retry_delay_ms", std::to_string(options_.retry_delay.count())},
          {"max_bytes", std::to_string(options_.max_bytes)},
          {"headers", header_names}};
}

}  // namespace dpipe::io
