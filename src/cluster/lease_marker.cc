#include "cluster/lease_marker.h"

#include <limits>

#include "base/check.h"
#include "base/line_format.h"

namespace wk {
namespace {

constexpr std::uint64_t kMaxMs = std::numeric_limits<std::int64_t>::max();

// An old lease: its header alone identifies it; the fields we use are read when present
// and well-formed, ignored otherwise (we never wrote this format and do not hold it to our
// codec's rules).
OldLease DecodeOldLease(std::string_view body) {
  OldLease old;
  while (!body.empty()) {
    const std::size_t nl = body.find('\n');
    const std::string_view line = body.substr(0, nl);
    body.remove_prefix(nl == std::string_view::npos ? body.size() : nl + 1);
    const std::size_t sp = line.find(' ');
    if (sp == std::string_view::npos) continue;
    const std::string_view key = line.substr(0, sp), value = line.substr(sp + 1);
    if (key == "node") {
      NodeId id(value);
      if (ValidateNodeId(id).ok()) old.node_id = std::move(id);
    } else if (key == "generation") {
      if (auto g = line_format::ParseUint(value)) old.generation = Generation{*g};
    } else if (key == "expires_at_ms" || key == "expires_at") {
      if (auto ms = line_format::ParseUint(value, kMaxMs)) old.expires_at = FromUnixMs(static_cast<std::int64_t>(*ms));
    }
  }
  return old;
}

}  // namespace

std::string EncodeLeaseMarker(const LeaseMarker& m) {
  WK_CHECK(ValidateNodeId(m.marked_by).ok(), "a lease marker names the node that wrote it");
  line_format::LineWriter w("lease", 2);
  w.Field("seed", m.seed.value);
  w.Field("marked_by", m.marked_by.str());
  w.UnixMsField("marked_at", m.marked_at);
  return std::move(w).Take();
}

Result<LeasesObject> DecodeLeasesObject(std::string_view body) {
  auto header = line_format::PeekHeader(body);
  if (header && header->kind == "lease" && header->version == 1) return LeasesObject(DecodeOldLease(body));
  auto reader = line_format::LineReader::Open(body, "lease", 2, "wasmkeep-lease 2 marker");
  if (!reader.ok()) return reader.status();
  LeaseMarker m;
  auto seed = reader->UintField("seed", kMaxGeneration);
  if (!seed.ok()) return seed.status();
  m.seed = Generation{*seed};
  auto by = reader->Field("marked_by");
  if (!by.ok()) return by.status();
  m.marked_by = NodeId(*by);
  if (!ValidateNodeId(m.marked_by).ok()) return reader->Corrupt("bad node id");
  auto at = reader->UnixMsField("marked_at");
  if (!at.ok()) return at.status();
  m.marked_at = *at;
  if (Status s = reader->Finish(); !s.ok()) return s;
  return LeasesObject(m);
}

bool OldLeaseLive(const OldLease& lease, WallTime now, const LeaseTiming& timing) {
  if (!lease.expires_at) return true;
  return now < *lease.expires_at + timing.grace;
}

std::string DescribeOldLease(const OldLease& lease) {
  std::string out = lease.node_id ? "node " + lease.node_id->str() : std::string("an unreadable node");
  out += lease.generation ? ", generation " + std::to_string(lease.generation->value) : ", no readable generation";
  out += lease.expires_at ? ", expires_at " + std::to_string(ToUnixMs(*lease.expires_at)) + " ms"
                          : ", no readable expiry (never taken for expired)";
  return out;
}

}  // namespace wk
