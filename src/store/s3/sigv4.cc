#include "store/s3/sigv4.h"

#include <algorithm>
#include <ctime>

#include "base/check.h"

namespace wk {
namespace {

constexpr char kHexUpper[] = "0123456789ABCDEF";
constexpr std::string_view kAlgorithm = "AWS4-HMAC-SHA256";

char ToLowerAscii(char c) { return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c; }

bool IsSpace(char c) { return c == ' ' || c == '\t'; }

// Canonical header value: leading/trailing whitespace trimmed, inner runs collapsed to one
// space (AWS: "Trimall").
std::string TrimAll(std::string_view v) {
  std::string out;
  out.reserve(v.size());
  bool pending_space = false;
  for (char c : v) {
    if (IsSpace(c)) {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) out.push_back(' ');
    pending_space = false;
    out.push_back(c);
  }
  return out;
}

}  // namespace

std::string UriEncode(std::string_view text, bool keep_slash) {
  std::string out;
  out.reserve(text.size() * 3);
  for (char ch : text) {
    auto c = static_cast<unsigned char>(ch);
    bool unreserved = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
                      c == '-' || c == '_' || c == '.' || c == '~';
    if (unreserved || (keep_slash && c == '/')) {
      out.push_back(ch);
    } else {
      out.push_back('%');
      out.push_back(kHexUpper[c >> 4]);
      out.push_back(kHexUpper[c & 0xf]);
    }
  }
  return out;
}

std::string UriEncodePath(std::string_view decoded_path) {
  if (decoded_path.empty() || decoded_path[0] != '/') return "/" + UriEncode(decoded_path, true);
  return UriEncode(decoded_path, true);
}

std::string CanonicalQueryString(const HttpParams& query) {
  std::vector<std::pair<std::string, std::string>> encoded;
  encoded.reserve(query.size());
  for (const auto& [name, value] : query) {
    encoded.emplace_back(UriEncode(name, false), UriEncode(value, false));
  }
  std::sort(encoded.begin(), encoded.end());  // by name, then value, as bytes
  std::string out;
  for (const auto& [name, value] : encoded) {
    if (!out.empty()) out.push_back('&');
    out += name;
    out.push_back('=');
    out += value;
  }
  return out;
}

std::string SigV4SigningKey(std::string_view secret_key, std::string_view date,
                            std::string_view region, std::string_view service) {
  std::string key = HmacSha256("AWS4" + std::string(secret_key), date);
  key = HmacSha256(key, region);
  key = HmacSha256(key, service);
  return HmacSha256(key, "aws4_request");
}

std::string AmzDate(WallTime t) {
  std::time_t secs = static_cast<std::time_t>(ToUnixMs(t) / 1000);
  std::tm tm{};
  gmtime_r(&secs, &tm);
  char buf[32];
  std::size_t n = std::strftime(buf, sizeof(buf), "%Y%m%dT%H%M%SZ", &tm);
  WK_CHECK(n == 16, "strftime produced a malformed amz date");
  return std::string(buf, n);
}

SigV4Signature SignV4(const SigV4Request& request, const SigV4Credentials& credentials,
                      std::string_view region, std::string_view service,
                      std::string_view amz_date) {
  WK_CHECK(amz_date.size() == 16, "amz_date must be YYYYMMDDTHHMMSSZ");
  const std::string_view date = amz_date.substr(0, 8);

  // Canonical headers: lowercase names, sorted; values trimmed.
  std::vector<std::pair<std::string, std::string>> headers;
  headers.reserve(request.headers.size());
  for (const auto& [name, value] : request.headers) {
    std::string lower(name);
    std::transform(lower.begin(), lower.end(), lower.begin(), ToLowerAscii);
    headers.emplace_back(std::move(lower), TrimAll(value));
  }
  std::stable_sort(headers.begin(), headers.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  std::string canonical_headers, signed_headers;
  for (std::size_t i = 0; i < headers.size(); ++i) {
    // A header given twice is one canonical line with the values comma-joined.
    if (i > 0 && headers[i].first == headers[i - 1].first) {
      canonical_headers.pop_back();  // the '\n'
      canonical_headers += "," + headers[i].second + "\n";
      continue;
    }
    canonical_headers += headers[i].first + ":" + headers[i].second + "\n";
    if (!signed_headers.empty()) signed_headers.push_back(';');
    signed_headers += headers[i].first;
  }

  SigV4Signature sig;
  sig.signed_headers = signed_headers;
  sig.canonical_request = std::string(request.method) + "\n" + std::string(request.canonical_uri) +
                          "\n" + CanonicalQueryString(request.query) + "\n" + canonical_headers +
                          "\n" + signed_headers + "\n" + std::string(request.payload_hash);

  const std::string scope = std::string(date) + "/" + std::string(region) + "/" +
                            std::string(service) + "/aws4_request";
  sig.string_to_sign = std::string(kAlgorithm) + "\n" + std::string(amz_date) + "\n" + scope +
                       "\n" + Sha256Hex(sig.canonical_request);

  const std::string key = SigV4SigningKey(credentials.secret_key, date, region, service);
  const std::string raw = HmacSha256(key, sig.string_to_sign);
  sig.signature = ToHex(raw);

  sig.authorization = std::string(kAlgorithm) + " Credential=" + credentials.access_key + "/" +
                      scope + ",SignedHeaders=" + signed_headers + ",Signature=" + sig.signature;
  return sig;
}

}  // namespace wk
