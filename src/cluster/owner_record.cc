#include "cluster/owner_record.h"

#include "base/line_format.h"
#include "cluster/node_record.h"

namespace wk {
namespace {

bool IsInstance(std::string_view s) {
  if (s.empty() || s.size() > 64 || s == "-" || s == "nobody") return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) return false;
  }
  return true;
}

}  // namespace

std::string EncodeOwnerRecord(const OwnerRecord& r) {
  line_format::LineWriter w("owner", 1);
  if (r.names_nobody()) {
    WK_CHECK(r.instance.empty(), "a record naming nobody has no instance");
    w.Field("owner", "nobody");
  } else {
    WK_CHECK(ValidateNodeId(r.node_id).ok() && IsInstance(r.instance.str()), "encoding an invalid owner record");
    w.Field("owner", r.node_id.str() + " " + r.instance.str());
  }
  w.Field("generation", r.generation.value);
  return std::move(w).Take();
}

Result<OwnerRecord> DecodeOwnerRecord(std::string_view body) {
  auto reader = line_format::LineReader::Open(body, "owner", 1, "wasmkeep-owner 1 record");
  if (!reader.ok()) return reader.status();
  OwnerRecord r;
  auto owner = reader->Field("owner");
  if (!owner.ok()) return owner.status();
  if (*owner != "nobody") {
    std::size_t sp = owner->find(' ');
    if (sp == std::string_view::npos) return reader->Corrupt("the owner line needs a node and an instance");
    r.node_id = NodeId(owner->substr(0, sp));
    r.instance = InstanceToken(owner->substr(sp + 1));
    if (!ValidateNodeId(r.node_id).ok() || !IsInstance(r.instance.str())) return reader->Corrupt("bad node id or instance");
  }
  auto generation = reader->UintField("generation", kMaxGeneration);
  if (!generation.ok()) return generation.status();
  r.generation.value = *generation;
  if (Status s = reader->Finish(); !s.ok()) return s;
  return r;
}

}  // namespace wk
