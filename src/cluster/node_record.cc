#include "cluster/node_record.h"

#include <limits>

#include "base/line_format.h"

namespace wk {
namespace {

constexpr std::uint64_t kMaxMs = std::numeric_limits<std::int64_t>::max();
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

std::string OptionalField(const std::string& v) { return v.empty() ? "-" : v; }
std::string FromOptionalField(std::string_view v) { return v == "-" ? "" : std::string(v); }

}  // namespace

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
  } else if (!IsToken(r.instance.str(), kMaxInstanceBytes) || r.instance.str() == "-") {
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
  line_format::LineWriter w("node", 3);
  w.Reserve(256);
  w.Field("lease", std::string(LeaseStateName(r.state)) + " " + OptionalField(r.instance.str()));
  w.Field("written_at", static_cast<std::uint64_t>(ToUnixMs(r.written_at)));
  w.Field("node", r.node_id.str());
  w.Field("address", OptionalField(r.address));
  w.Field("version", r.software_version);
  w.Field("started_at", static_cast<std::uint64_t>(ToUnixMs(r.started_at)));
  w.Field("cert_pin", OptionalField(r.cert_pin));
  return std::move(w).Take();
}

namespace {

// Older formats are recognised by their header only (we never wrote them with this codec
// and do not hold them to its rules). Their written_at is read when a line
// "written_at_ms <n>" or "written_at <n>" is present; otherwise unknown, which the start
// guard treats as fresh (never free).
OldHeartbeat DecodeOldHeartbeat(std::string_view body, std::uint64_t version) {
  OldHeartbeat old;
  old.format_version = static_cast<int>(version);
  while (!body.empty()) {
    const std::size_t nl = body.find('\n');
    const std::string_view line = body.substr(0, nl);
    body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
    for (std::string_view name : {"written_at_ms ", "written_at "}) {
      if (line.starts_with(name)) {
        if (auto ms = line_format::ParseUint(line.substr(name.size()), kMaxMs)) {
          old.written_at = FromUnixMs(static_cast<std::int64_t>(*ms));
        }
      }
    }
  }
  return old;
}

}  // namespace

Result<NodeObject> DecodeNodeObject(std::string_view body) {
  auto header = line_format::PeekHeader(body);
  if (header && header->kind == "node" && (header->version == 1 || header->version == 2)) {
    return NodeObject(DecodeOldHeartbeat(body, header->version));
  }
  if (!header || header->kind != "node") {
    return Fatal("not a wasmkeep-node object (header '" + std::string(body.substr(0, std::min<std::size_t>(body.find('\n'), 40))) + "')");
  }
  auto reader = line_format::LineReader::Open(body, "node", 3, "wasmkeep-node 3 object");
  if (!reader.ok()) return reader.status();

  NodeRecord r;
  auto lease = reader->Field("lease");
  if (!lease.ok()) return lease.status();
  std::size_t sp = lease->find(' ');
  if (sp == std::string_view::npos) return reader->Corrupt("the lease line has no instance");
  std::string_view state = lease->substr(0, sp), instance = lease->substr(sp + 1);
  if (state == "live") r.state = LeaseState::kLive;
  else if (state == "released") r.state = LeaseState::kReleased;
  else if (state == "fenced") r.state = LeaseState::kFenced;
  else return reader->Corrupt("unknown lease state '" + std::string(state.substr(0, 20)) + "'");
  r.instance = InstanceToken(FromOptionalField(instance));

  auto written = reader->UintField("written_at", kMaxMs);
  if (!written.ok()) return written.status();
  r.written_at = FromUnixMs(static_cast<std::int64_t>(*written));
  auto node = reader->Field("node");
  if (!node.ok()) return node.status();
  r.node_id = NodeId(*node);
  auto address = reader->Field("address");
  if (!address.ok()) return address.status();
  r.address = FromOptionalField(*address);
  auto version = reader->Field("version");
  if (!version.ok()) return version.status();
  r.software_version = std::string(*version);
  auto started = reader->UintField("started_at", kMaxMs);
  if (!started.ok()) return started.status();
  r.started_at = FromUnixMs(static_cast<std::int64_t>(*started));
  auto pin = reader->Field("cert_pin");
  if (!pin.ok()) return pin.status();
  r.cert_pin = FromOptionalField(*pin);
  if (Status s = reader->Finish(); !s.ok()) return s;

  // Validate after reading, as before writing: a record we could not have written is
  // corrupt.
  if (Status s = ValidateNodeRecord(r); !s.ok()) return reader->CorruptBody(s.message());
  return NodeObject(std::move(r));
}

}  // namespace wk
