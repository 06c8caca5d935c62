#include "store/s3/s3_xml.h"

#include <pugixml.hpp>

#include <charconv>
#include <chrono>

namespace wk {
namespace {

// How much of a non-XML error body goes into a message: enough to recognise a proxy's
// page, short enough for one log line.
constexpr std::size_t kMaxRawErrorChars = 200;

// parse_ws_pcdata keeps whitespace-only text: a key may be " " and must survive.
constexpr unsigned kParseFlags = pugi::parse_default | pugi::parse_ws_pcdata;

Status Malformed(std::string_view what) {
  return Fatal("malformed ListObjectsV2 response: " + std::string(what));
}

std::string OneLine(std::string_view text) {
  std::string out;
  for (char c : text.substr(0, kMaxRawErrorChars)) out.push_back(c == '\n' || c == '\r' ? ' ' : c);
  return out;
}

}  // namespace

std::string UnquoteETag(std::string_view etag) {
  if (etag.size() >= 2 && etag.front() == '"' && etag.back() == '"') {
    etag = etag.substr(1, etag.size() - 2);
  }
  return std::string(etag);
}

Result<S3ListResult> ParseListObjectsV2(std::string_view xml) {
  pugi::xml_document doc;
  pugi::xml_parse_result parsed = doc.load_buffer(xml.data(), xml.size(), kParseFlags);
  if (!parsed) return Malformed(std::string("not XML: ") + parsed.description());
  pugi::xml_node root = doc.child("ListBucketResult");
  if (!root) return Malformed("no ListBucketResult element");

  S3ListResult out;
  if (pugi::xml_node t = root.child("IsTruncated")) {
    std::string_view v = t.text().get();
    if (v == "true") {
      out.is_truncated = true;
    } else if (v != "false") {
      return Malformed("IsTruncated is '" + std::string(v) + "'");
    }
  }
  if (pugi::xml_node n = root.child("NextContinuationToken")) {
    out.next_continuation_token = n.text().get();
  }
  if (out.is_truncated && (!out.next_continuation_token || out.next_continuation_token->empty())) {
    return Malformed("IsTruncated without NextContinuationToken");
  }

  for (pugi::xml_node c = root.child("Contents"); c; c = c.next_sibling("Contents")) {
    pugi::xml_node key = c.child("Key"), etag = c.child("ETag"), size = c.child("Size");
    if (!key || !etag || !size) return Malformed("a Contents entry lacks Key, ETag or Size");
    S3ListEntry e;
    e.key = key.text().get();
    if (e.key.empty()) return Malformed("empty Key");
    e.etag = UnquoteETag(etag.text().get());
    std::string_view size_text = size.text().get();
    auto [ptr, ec] = std::from_chars(size_text.data(), size_text.data() + size_text.size(), e.size);
    if (ec != std::errc() || ptr != size_text.data() + size_text.size()) {
      return Malformed("Size '" + std::string(size_text) + "' of key '" + e.key + "'");
    }
    if (pugi::xml_node modified = c.child("LastModified")) {
      e.modified_ms = ParseS3Timestamp(modified.text().get()).value_or(0);
    }
    out.entries.push_back(std::move(e));
  }
  return out;
}

std::optional<std::int64_t> ParseS3Timestamp(std::string_view text) {
  // YYYY-MM-DDTHH:MM:SS, then an optional .fraction, then Z.
  constexpr std::size_t kSecondsEnd = 19;
  if (text.size() < kSecondsEnd + 1 || text[4] != '-' || text[7] != '-' || text[10] != 'T' ||
      text[13] != ':' || text[16] != ':') {
    return std::nullopt;
  }
  auto number = [&](std::size_t at, std::size_t n) -> std::optional<int> {
    int v = 0;
    for (std::size_t i = at; i < at + n; ++i) {
      if (text[i] < '0' || text[i] > '9') return std::nullopt;
      v = v * 10 + (text[i] - '0');
    }
    return v;
  };
  const auto year = number(0, 4), month = number(5, 2), day = number(8, 2);
  const auto hour = number(11, 2), minute = number(14, 2), second = number(17, 2);
  if (!year || !month || !day || !hour || !minute || !second) return std::nullopt;
  const std::chrono::year_month_day date{std::chrono::year(*year),
                                         std::chrono::month(static_cast<unsigned>(*month)),
                                         std::chrono::day(static_cast<unsigned>(*day))};
  if (!date.ok() || *hour > 23 || *minute > 59 || *second > 59) return std::nullopt;

  std::size_t at = kSecondsEnd;
  std::int64_t millis = 0;
  if (text[at] == '.') {
    std::size_t digits = 0;
    for (++at; at < text.size() && text[at] >= '0' && text[at] <= '9'; ++at, ++digits) {
      if (digits < 3) millis = millis * 10 + (text[at] - '0');
    }
    if (digits == 0) return std::nullopt;
    for (; digits < 3; ++digits) millis *= 10;
  }
  if (at + 1 != text.size() || text[at] != 'Z') return std::nullopt;

  const std::int64_t days = std::chrono::sys_days(date).time_since_epoch().count();
  const std::int64_t seconds = ((days * 24 + *hour) * 60 + *minute) * 60 + *second;
  return seconds * 1000 + millis;
}

S3Error ParseS3Error(std::string_view body) {
  S3Error err;
  if (body.empty()) return err;
  pugi::xml_document doc;
  pugi::xml_node root;
  if (doc.load_buffer(body.data(), body.size(), kParseFlags)) root = doc.child("Error");
  if (!root) {
    err.message = OneLine(body);
    return err;
  }
  err.code = root.child("Code").text().get();
  err.message = OneLine(root.child("Message").text().get());
  return err;
}

}  // namespace wk
