// The "s3" opener and lister: s3:// paths opened as S3Sources (or through the cache), their
// checkpoint origins, and prefix listings in list_files()' order.

#include <algorithm>
#include <array>
#include <charconv>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <fmt/core.h>

#include <dpipe/core/error.hpp>
#include <dpipe/io/s3.hpp>

#include "io/opener_registry.hpp"
#include "io/s3_cache.hpp"
#include "io/s3_client.hpp"

namespace dpipe::io::detail {
namespace {

constexpr std::string_view kOriginPrefix = "s3[";

/// What a checkpoint needs to open an object again: "s3[length=<n>,etag=<size>:<etag>]:<url>".
std::string s3_origin(const S3Location& location, const std::string& etag, std::optional<std::uint64_t> length) {
  return fmt::format("{}length={},etag={}:{}]:{}", kOriginPrefix, length ? std::to_string(*length) : std::string("-"),
                     etag.size(), etag, location.url());
}

struct ObjectOrigin {
  S3Location location;
  std::string etag;
  std::optional<std::uint64_t> length;
};

std::optional<std::uint64_t> take_number(std::string_view& text) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{}) return std::nullopt;
  text.remove_prefix(static_cast<std::size_t>(end - text.data()));
  return value;
}

/// The parts of an s3_origin(), or std::nullopt.
std::optional<ObjectOrigin> parse_origin(std::string_view text) {
  if (!text.starts_with(kOriginPrefix)) return std::nullopt;
  text.remove_prefix(kOriginPrefix.size());
  ObjectOrigin origin;
  if (!text.starts_with("length=")) return std::nullopt;
  text.remove_prefix(7);
  if (text.starts_with("-")) {
    text.remove_prefix(1);
  } else {
    origin.length = take_number(text);
    if (!origin.length) return std::nullopt;
  }
  if (!text.starts_with(",etag=")) return std::nullopt;
  text.remove_prefix(6);
  const auto etag_size = take_number(text);
  if (!etag_size || !text.starts_with(":") || text.size() < *etag_size + 1) return std::nullopt;
  origin.etag = text.substr(1, *etag_size);
  text.remove_prefix(*etag_size + 1);
  if (!text.starts_with("]:")) return std::nullopt;
  auto location = parse_s3_url(text.substr(2));
  if (!location) return std::nullopt;
  origin.location = std::move(*location);
  return origin;
}

/// The sizes and ETags of objects, by URL, as the last listing or HEAD request of this process
/// found them: the cache needs no HEAD request for an object list_files() listed, and one per
/// object and process for the others. Thread-safe.
class ListedObjects {
 public:
  static ListedObjects& instance() {
    static ListedObjects objects;
    return objects;
  }

  void remember(const std::string& bucket, const std::vector<S3ObjectInfo>& objects) {
    const std::lock_guard lock(mutex_);
    for (const auto& object : objects) known_[S3Location{bucket, object.key}.url()] = object;
  }

  void remember(const std::string& url, const S3ObjectInfo& object) {
    const std::lock_guard lock(mutex_);
    known_[url] = object;
  }

  [[nodiscard]] std::optional<S3ObjectInfo> find(const std::string& url) const {
    const std::lock_guard lock(mutex_);
    const auto found = known_.find(url);
    if (found == known_.end()) return std::nullopt;
    return found->second;
  }

 private:
  mutable std::mutex mutex_;
  std::unordered_map<std::string, S3ObjectInfo> known_;
};

/// Opens an object through the cache: its ETag and size from the checkpoint, a listing or a HEAD.
OpenedFile open_cached(const S3Options& options, ObjectOrigin origin, std::string_view node) {
  const std::string url = origin.location.url();
  if (origin.etag.empty() || !origin.length) {
    auto info = ListedObjects::instance().find(url);
    if (!info) {
      info = head_s3_object(options, origin.location, node);
      if (!info) throw DataError(node, {.path = url}, "cannot open: HTTP status 404 (no object has this key)");
      ListedObjects::instance().remember(url, *info);
    }
    origin.etag = info->etag;
    origin.length = info->size;
  }
  const Download download = [&](const ByteSink& sink) {
    S3Source source(origin.location, options, origin.etag, origin.length);
    std::vector<char> buffer(std::size_t{1} << 20);
    while (const std::size_t got = source.read(buffer.data(), buffer.size())) sink(buffer.data(), got);
    return source.etag_is_digest();
  };
  auto source = cached_object(options.cache, url, origin.etag, *origin.length, download, node);
  return {url, s3_origin(origin.location, origin.etag, origin.length), std::move(source)};
}

/// Opens an s3:// path (at its start) or an origin a checkpoint saved (not started: the reader's
/// seek sends the Range request).
OpenedFile open_s3(const std::string& text, std::string_view node) {
  std::optional<ObjectOrigin> origin;
  const bool fresh = text.starts_with("s3://");
  if (fresh) {
    auto location = parse_s3_url(text);
    if (!location) throw DataError(node, {.path = text}, "cannot open: not an s3://bucket/key path");
    if (location->key.empty() || location->key.ends_with('/'))
      throw DataError(node, {.path = text}, "cannot open: it names a prefix, not an object (list_files lists it)");
    origin = ObjectOrigin{std::move(*location), {}, std::nullopt};
  } else {
    origin = parse_origin(text);
    if (!origin) throw malformed_origin(text, "s3", node);
  }
  const S3Options options = s3_options();
  if (!options.cache.directory.empty()) return open_cached(options, std::move(*origin), node);
  const std::string url = origin->location.url();
  auto source = std::make_unique<S3Source>(origin->location, options, origin->etag, origin->length);
  if (!fresh) return {url, text, std::move(source)};
  try {
    source->start(0);  // a missing object or a refusal is the opener's error, as for a file
  } catch (const SourceFailure& failure) {
    throw DataError(node, {.path = url}, fmt::format("cannot open: {}", failure.what()));
  }
  std::string saved = s3_origin(origin->location, source->etag(), source->length());
  return {url, std::move(saved), std::move(source)};
}

/// A listed key: the part below the directory being walked, and the whole key.
struct KeyBelow {
  std::string_view rest;
  std::string_view key;
};

/// Appends "s3://<bucket>/<key>" for the keys of `below` (the keys under one "directory", sorted
/// by `rest`) whose name matches, in list_files()' order: this level's objects, then each
/// subdirectory's in sorted order. Names are never joined, so a key with "//" stays itself.
void walk(const std::vector<KeyBelow>& below, const std::string& bucket, const std::vector<std::string>& masks,
          std::vector<std::string>& out) {
  std::map<std::string_view, std::vector<KeyBelow>> directories;
  for (const auto& entry : below) {
    const auto slash = entry.rest.find('/');
    if (slash == std::string_view::npos) {
      // An empty name is a "folder" marker ("data/"), not an object to read.
      if (!entry.rest.empty() && matches_masks(std::string(entry.rest), masks))
        out.push_back(fmt::format("s3://{}/{}", bucket, entry.key));
    } else {
      directories[entry.rest.substr(0, slash)].push_back({entry.rest.substr(slash + 1), entry.key});
    }
  }
  for (const auto& [directory, keys] : directories) walk(keys, bucket, masks, out);
}

std::vector<std::string> list_s3(const std::string& root, const std::vector<std::string>& masks, bool recursive,
                                 std::string_view node) {
  const auto location = parse_s3_url(root);
  if (!location) throw DataError(node, {.path = root}, "cannot list: not an s3://bucket/prefix path");
  const S3Options options = s3_options();
  std::string prefix = location->key;
  if (!prefix.empty() && !prefix.ends_with('/')) prefix += '/';
  const auto listing = list_s3_objects(options, location->bucket, prefix, recursive ? "" : "/", node);
  if (!options.cache.directory.empty()) ListedObjects::instance().remember(location->bucket, listing.objects);
  std::vector<std::string> paths;
  if (listing.objects.empty() && !listing.has_prefixes && prefix != location->key) {
    // "s3://b/data" with nothing under "data/": an object, or nothing at all.
    const auto object = head_s3_object(options, *location, node);
    if (!object) throw DataError(node, {.path = root}, "cannot list: no object has this key and none is under it");
    const auto name = std::string_view(location->key).substr(location->key.rfind('/') + 1);
    if (matches_masks(std::string(name), masks)) paths.push_back(location->url());
    return paths;
  }
  std::vector<KeyBelow> below;
  below.reserve(listing.objects.size());
  for (const auto& object : listing.objects)
    below.push_back({std::string_view(object.key).substr(prefix.size()), object.key});
  // S3 lists in byte order already; some compatible servers do not, and the order must not depend
  // on the server.
  std::sort(below.begin(), below.end(), [](const KeyBelow& a, const KeyBelow& b) { return a.rest < b.rest; });
  walk(below, location->bucket, masks, paths);
  return paths;
}

}  // namespace

void add_s3_openers(const AddOpener& add) { add("s3", open_s3); }

Lister s3_lister() { return list_s3; }

}  // namespace dpipe::io::detail
