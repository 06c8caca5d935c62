#include "store/s3/s3_xml.h"

#include <pugixml.hpp>

#include <charconv>

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
    out.entries.push_back(std::move(e));
  }
  return out;
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
