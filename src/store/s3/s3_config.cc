#include "store/s3/s3_config.h"

#include <charconv>
#include <cstdlib>
#include <set>
#include <vector>

namespace wk {
namespace {

constexpr std::string_view kScheme = "s3://";
// Bounds on max_connections: at least one, and not so many that a typo exhausts the
// process's file descriptors.
constexpr int kMinConnections = 1;
constexpr int kMaxConnections = 1024;
// S3 allows 63; RGW and MinIO can be configured for longer names. This only stops junk.
constexpr std::size_t kMaxBucketNameBytes = 255;

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Decodes %XX escapes (and nothing else: '+' stays '+', this is a URL, not a form).
std::optional<std::string> PercentDecode(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  for (std::size_t i = 0; i < in.size(); ++i) {
    if (in[i] != '%') {
      out.push_back(in[i]);
      continue;
    }
    if (i + 2 >= in.size()) return std::nullopt;
    int hi = HexValue(in[i + 1]), lo = HexValue(in[i + 2]);
    if (hi < 0 || lo < 0) return std::nullopt;
    out.push_back(static_cast<char>(hi * 16 + lo));
    i += 2;
  }
  return out;
}

Result<bool> ParseBool(std::string_view name, std::string_view value) {
  if (value == "true") return true;
  if (value == "false") return false;
  return InvalidArgument("s3 URL: bad boolean for " + std::string(name) + ": '" +
                         std::string(value) + "' (use true or false)");
}

bool IsBucketChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
         c == '.' || c == '-' || c == '_';
}

}  // namespace

GetenvFn SystemGetenv() {
  return [](const char* name) -> std::optional<std::string> {
    const char* v = std::getenv(name);
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Result<S3Config> ParseS3Url(std::string_view url, const GetenvFn& getenv, const ReadFileFn& read_file) {
  if (!url.starts_with(kScheme)) {
    return InvalidArgument("s3 URL must start with s3:// (got '" + std::string(url) + "')");
  }
  std::string_view rest = url.substr(kScheme.size());
  std::string_view query;
  if (std::size_t q = rest.find('?'); q != std::string_view::npos) {
    query = rest.substr(q + 1);
    rest = rest.substr(0, q);
  }
  std::string_view bucket = rest;
  if (std::size_t slash = rest.find('/'); slash != std::string_view::npos) {
    if (slash + 1 != rest.size()) {
      return InvalidArgument("s3 URL: key prefixes are not supported (got path '" +
                             std::string(rest.substr(slash)) + "')");
    }
    bucket = rest.substr(0, slash);
  }
  if (bucket.empty()) return InvalidArgument("s3 URL: missing bucket (s3://BUCKET?endpoint=...)");
  if (bucket.size() > kMaxBucketNameBytes) return InvalidArgument("s3 URL: bucket name too long");
  for (char c : bucket) {
    if (!IsBucketChar(c)) {
      return InvalidArgument("s3 URL: bad bucket name '" + std::string(bucket) +
                             "' (letters, digits, '.', '-', '_')");
    }
  }

  S3Config cfg;
  cfg.bucket = std::string(bucket);
  std::optional<std::string> endpoint;
  std::optional<std::string> region;
  std::set<std::string, std::less<>> seen;
  while (!query.empty()) {
    std::size_t amp = query.find('&');
    std::string_view pair = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view() : query.substr(amp + 1);
    if (pair.empty()) continue;  // tolerate "a=1&&b=2" and a trailing '&'
    std::size_t eq = pair.find('=');
    auto name = PercentDecode(pair.substr(0, eq));
    auto value = PercentDecode(eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1));
    if (!name || !value) {
      return InvalidArgument("s3 URL: bad percent-encoding in query parameter '" +
                             std::string(pair) + "'");
    }
    if (!seen.insert(*name).second) {
      return InvalidArgument("s3 URL: duplicate query parameter '" + *name + "'");
    }
    if (*name == "endpoint") {
      endpoint = *value;
    } else if (*name == "region") {
      if (value->empty()) return InvalidArgument("s3 URL: region is empty");
      region = *value;
    } else if (*name == "if_match_quoted") {
      auto b = ParseBool(*name, *value);
      if (!b.ok()) return b.status();
      cfg.if_match_quoted = *b;
    } else if (*name == "conditional_delete") {
      auto b = ParseBool(*name, *value);
      if (!b.ok()) return b.status();
      cfg.conditional_delete = *b;
    } else if (*name == "max_connections") {
      int n = 0;
      auto [ptr, ec] = std::from_chars(value->data(), value->data() + value->size(), n);
      if (ec != std::errc() || ptr != value->data() + value->size() || n < kMinConnections ||
          n > kMaxConnections) {
        return InvalidArgument("s3 URL: max_connections must be a number in " +
                               std::to_string(kMinConnections) + ".." +
                               std::to_string(kMaxConnections) + " (got '" + *value + "')");
      }
      cfg.max_connections = n;
    } else {
      return InvalidArgument("s3 URL: unknown query parameter '" + *name +
                             "' (known: endpoint, region, if_match_quoted, conditional_delete, "
                             "max_connections)");
    }
  }

  // Everything the URL leaves out comes from where AWS users keep it: the URL first, then
  // the environment, then the AWS shared files (aws_profile.h), then the defaults.
  auto profile = LoadAwsProfile(getenv, read_file);
  if (!profile.ok()) return profile.status();
  std::vector<std::string> sources;
  auto first_of = [&](std::optional<std::string>* out, const char* what,
                      std::initializer_list<const char*> variables, const std::optional<std::string>& from_profile) {
    if (*out) {
      sources.push_back(std::string(what) + " from the URL");
      return;
    }
    for (const char* v : variables) {
      if (auto value = getenv(v); value && !value->empty()) {
        *out = std::move(*value);
        sources.push_back(std::string(what) + " from " + v);
        return;
      }
    }
    if (from_profile) {
      *out = *from_profile;
      sources.push_back(std::string(what) + " from " + profile->sources[what]);
    }
  };
  first_of(&region, "region", {"AWS_REGION", "AWS_DEFAULT_REGION"}, profile->region);
  first_of(&endpoint, "endpoint", {"AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL"}, profile->endpoint_url);
  if (!endpoint && region) {
    // A region and no endpoint anywhere: AWS S3 itself (path-style, as every request here).
    endpoint = "https://s3." + *region + ".amazonaws.com";
    sources.push_back("endpoint: AWS S3 in that region");
  }
  if (!endpoint || endpoint->empty()) {
    return InvalidArgument("s3 URL: missing endpoint (add ?endpoint=http(s)://host:port, set AWS_ENDPOINT_URL_S3 or "
                           "AWS_ENDPOINT_URL, endpoint_url in ~/.aws/config, or a region for AWS S3)");
  }
  if (region) cfg.region = *region;
  auto ep = ParseS3Endpoint(*endpoint);
  if (!ep.ok()) return ep.status();
  if (endpoint->ends_with("/")) endpoint->pop_back();
  cfg.endpoint = std::move(*endpoint);

  // Credentials: the environment (and the config file's [s3], which the caller's getenv
  // serves under the same names), then the AWS profile; key and secret from one place.
  auto access = getenv("AWS_ACCESS_KEY_ID");
  auto secret = getenv("AWS_SECRET_ACCESS_KEY");
  auto token = getenv("AWS_SESSION_TOKEN");
  const bool from_env = (access && !access->empty()) || (secret && !secret->empty());
  if (!from_env && profile->access_key_id) {
    access = profile->access_key_id;
    secret = profile->secret_access_key;
    token = profile->session_token;
    sources.push_back("credentials from " + profile->sources["aws_access_key_id"]);
  }
  if (!access || access->empty()) {
    return InvalidArgument("s3 store: missing credentials: AWS_ACCESS_KEY_ID is not set (nor aws_access_key_id in "
                           "the AWS profile '" + profile->name + "')");
  }
  if (!secret || secret->empty()) {
    return InvalidArgument("s3 store: missing credentials: AWS_SECRET_ACCESS_KEY is not set (nor "
                           "aws_secret_access_key beside the access key)");
  }
  cfg.access_key = std::move(*access);
  cfg.secret_key = std::move(*secret);
  if (token) cfg.session_token = std::move(*token);
  for (const auto& src : sources) cfg.settings_from += (cfg.settings_from.empty() ? "" : "; ") + src;
  return cfg;
}

std::string DescribeS3Config(const S3Config& cfg) {
  std::string out = "s3://" + cfg.bucket + "?endpoint=" + cfg.endpoint + "&region=" + cfg.region;
  if (!cfg.if_match_quoted) out += "&if_match_quoted=false";
  if (cfg.conditional_delete) out += "&conditional_delete=true";
  return out;
}

}  // namespace wk
