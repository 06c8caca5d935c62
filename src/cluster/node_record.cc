#include "cluster/node_record.h"

#include <charconv>
#include <vector>

namespace wk {
namespace {

constexpr std::string_view kHeaderV3 = "wasmkeep-node 3";
constexpr std::size_t kMaxInstanceBytes = 64;
constexpr std::size_t kMaxFieldBytes = 256;

bool IsToken(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) return false;  // printable ASCII without spaces
  }
  return true;
}

std::vector<std::string_view> SplitLines(std::string_view body, bool* terminated) {
  std::vector<std::string_view> lines;
  *terminated = body.empty() || body.back() == '\n';
  std::size_t pos = 0;
  while (pos < body.size()) {
    std::size_t nl = body.find('\n', pos);
    if (nl == std::string_view::npos) nl = body.size();
    lines.push_back(body.substr(pos, nl - pos));
    pos = nl + 1;
  }
  return lines;
}

bool ParseMs(std::string_view text, std::int64_t* out) {
  if (text.empty() || text.size() > 19) return false;
  for (char c : text)
    if (c < '0' || c > '9') return false;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), *out);
  return ec == std::errc() && p == text.data() + text.size();
}

// "name value" with exactly one space; returns the value.
std::optional<std::string_view> Field(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() + 1 || line.substr(0, name.size()) != name ||
      line[name.size()] != ' ') {
    return std::nullopt;
  }
  return line.substr(name.size() + 1);
}

std::string OptionalField(const std::string& v) { return v.empty() ? "-" : v; }
std::string FromOptionalField(std::string_view v) { return v == "-" ? "" : std::string(v); }

Status Corrupt(std::string what) { return Fatal("corrupt wasmkeep-node 3 object: " + what); }

}  // namespace

Status ValidateNodeId(std::string_view id) {
  if (id.empty() || id.size() > 64) return InvalidArgument("node id must be 1 to 64 characters");
  if (id == "." || id == "..") return InvalidArgument("node id cannot be '.' or '..'");
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-';
    if (!ok) {
      return InvalidArgument("node id '" + std::string(id) +
                             "' may contain only letters, digits, '.', '_' and '-'");
    }
  }
  return Status::Ok();
}

std::string_view LeaseStateName(LeaseState s) {
  switch (s) {
    case LeaseState::kLive: return "live";
    case LeaseState::kReleased: return "released";
    case LeaseState::kFenced: return "fenced";
  }
  return "?";
}

Status ValidateNodeRecord(const NodeRecord& r) {
  if (Status s = ValidateNodeId(r.node_id); !s.ok()) return s;
  if (r.instance.empty()) {
    if (r.state != LeaseState::kFenced) {
      return InvalidArgument("only a fence may name no instance");
    }
  } else if (!IsToken(r.instance, kMaxInstanceBytes) || r.instance == "-") {
    return InvalidArgument("instance must be 1 to 64 printable characters without spaces");
  }
  if (ToUnixMs(r.written_at) < 0 || ToUnixMs(r.started_at) < 0) {
    return InvalidArgument("times must not be before 1970");
  }
  for (const std::string* f : {&r.address, &r.cert_pin}) {
    if (!f->empty() && (!IsToken(*f, kMaxFieldBytes) || *f == "-")) {
      return InvalidArgument("address and cert_pin must be printable without spaces");
    }
  }
  if (!IsToken(r.software_version, kMaxFieldBytes)) {
    return InvalidArgument("software version must be printable without spaces");
  }
  return Status::Ok();
}

std::string EncodeNodeRecord(const NodeRecord& r) {
  Status s = ValidateNodeRecord(r);
  WK_CHECK(s.ok(), "encoding an invalid node record: " + s.ToString());
  std::string out;
  out.reserve(256);
  out += kHeaderV3;
  out += "\nlease ";
  out += LeaseStateName(r.state);
  out += ' ';
  out += OptionalField(r.instance);
  out += "\nwritten_at " + std::to_string(ToUnixMs(r.written_at));
  out += "\nnode " + r.node_id;
  out += "\naddress " + OptionalField(r.address);
  out += "\nversion " + r.software_version;
  out += "\nstarted_at " + std::to_string(ToUnixMs(r.started_at));
  out += "\ncert_pin " + OptionalField(r.cert_pin);
  out += '\n';
  return out;
}

Result<NodeObject> DecodeNodeObject(std::string_view body) {
  std::string_view first = body.substr(0, body.find('\n'));
  if (first == "wasmkeep-node 1" || first == "wasmkeep-node 2") {
    // Older formats: recognised by their header only. Their written_at is read when a line
    // "written_at_ms <n>" is present; otherwise unknown, which the start guard treats as
    // fresh (never free).
    OldHeartbeat old;
    old.format_version = first.back() - '0';
    bool terminated;
    for (std::string_view line : SplitLines(body, &terminated)) {
      for (std::string_view name : {"written_at_ms", "written_at"}) {
        if (auto v = Field(line, name)) {
          std::int64_t ms;
          if (ParseMs(*v, &ms)) old.written_at = FromUnixMs(ms);
        }
      }
    }
    return NodeObject(old);
  }
  if (first != kHeaderV3) {
    return Fatal("not a wasmkeep-node object (header '" + std::string(first.substr(0, 40)) + "')");
  }
  bool terminated;
  auto lines = SplitLines(body, &terminated);
  if (!terminated) return Corrupt("last line is not terminated");
  if (lines.size() != 8) return Corrupt("expected 8 lines, found " + std::to_string(lines.size()));

  NodeRecord r;
  auto lease = Field(lines[1], "lease");
  if (!lease) return Corrupt("line 2 is not 'lease <state> <instance>'");
  std::size_t sp = lease->find(' ');
  if (sp == std::string_view::npos) return Corrupt("lease line has no instance");
  std::string_view state = lease->substr(0, sp), instance = lease->substr(sp + 1);
  if (state == "live") r.state = LeaseState::kLive;
  else if (state == "released") r.state = LeaseState::kReleased;
  else if (state == "fenced") r.state = LeaseState::kFenced;
  else return Corrupt("unknown lease state '" + std::string(state.substr(0, 20)) + "'");
  r.instance = FromOptionalField(instance);

  std::int64_t ms;
  auto written = Field(lines[2], "written_at");
  if (!written || !ParseMs(*written, &ms)) return Corrupt("bad written_at line");
  r.written_at = FromUnixMs(ms);
  auto node = Field(lines[3], "node");
  if (!node) return Corrupt("bad node line");
  r.node_id = std::string(*node);
  auto address = Field(lines[4], "address");
  if (!address) return Corrupt("bad address line");
  r.address = FromOptionalField(*address);
  auto version = Field(lines[5], "version");
  if (!version) return Corrupt("bad version line");
  r.software_version = std::string(*version);
  auto started = Field(lines[6], "started_at");
  if (!started || !ParseMs(*started, &ms)) return Corrupt("bad started_at line");
  r.started_at = FromUnixMs(ms);
  auto pin = Field(lines[7], "cert_pin");
  if (!pin) return Corrupt("bad cert_pin line");
  r.cert_pin = FromOptionalField(*pin);

  // Validate after reading, as before writing: a record we could not have written is
  // corrupt.
  if (Status s = ValidateNodeRecord(r); !s.ok()) return Corrupt(s.message());
  return NodeObject(std::move(r));
}

}  // namespace wk
