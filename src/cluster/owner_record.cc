#include "cluster/owner_record.h"

#include "base/line_format.h"
#include "cluster/node_record.h"

namespace wk {
namespace {

constexpr std::string_view kHeader = "wasmkeep-owner 1";

bool TenantOrClassOk(std::string_view s) {
  if (s.empty() || s.size() > 63) return false;
  for (std::size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!(alnum || (i > 0 && (c == '_' || c == '-')))) return false;
  }
  return true;
}

bool NameOk(std::string_view s) {
  if (s.empty() || s.size() > 128 || s == "." || s == "..") return false;
  for (char c : s) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '~' || c == '-';
    if (!ok) return false;
  }
  return true;
}

bool IsInstance(std::string_view s) {
  if (s.empty() || s.size() > 64 || s == "-" || s == "nobody") return false;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) return false;
  }
  return true;
}

}  // namespace

Status ValidateActorId(const ActorId& id) {
  if (!TenantOrClassOk(id.tenant)) {
    return InvalidArgument("tenant '" + id.tenant.substr(0, 80) + "' must be 1-63 of a-z, 0-9, '_', '-', starting with a letter or digit");
  }
  if (!TenantOrClassOk(id.class_name)) {
    return InvalidArgument("class '" + id.class_name.substr(0, 80) + "' must be 1-63 of a-z, 0-9, '_', '-', starting with a letter or digit");
  }
  if (!NameOk(id.name)) {
    return InvalidArgument("actor name '" + id.name.substr(0, 80) + "' must be 1-128 of A-Z, a-z, 0-9, '.', '_', '~', '-' (not '.' or '..')");
  }
  return Status::Ok();
}

Result<ActorId> ParseActorId(std::string_view text) {
  std::size_t a = text.find('/');
  std::size_t b = a == std::string_view::npos ? a : text.find('/', a + 1);
  if (a == std::string_view::npos || b == std::string_view::npos || text.find('/', b + 1) != std::string_view::npos) {
    return InvalidArgument("actor must be tenant/class/name (got '" + std::string(text.substr(0, 200)) + "')");
  }
  ActorId id{std::string(text.substr(0, a)), std::string(text.substr(a + 1, b - a - 1)), std::string(text.substr(b + 1))};
  if (Status s = ValidateActorId(id); !s.ok()) return s;
  return id;
}

std::string EncodeOwnerRecord(const OwnerRecord& r) {
  line_format::LineWriter w("owner", 1);
  if (r.names_nobody()) {
    WK_CHECK(r.instance.empty(), "a record naming nobody has no instance");
    w.Field("owner", "nobody");
  } else {
    WK_CHECK(ValidateNodeId(r.node_id).ok() && IsInstance(r.instance), "encoding an invalid owner record");
    w.Field("owner", r.node_id + " " + r.instance);
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
    r.node_id = std::string(owner->substr(0, sp));
    r.instance = std::string(owner->substr(sp + 1));
    if (!ValidateNodeId(r.node_id).ok() || !IsInstance(r.instance)) return reader->Corrupt("bad node id or instance");
  }
  auto generation = reader->UintField("generation");
  if (!generation.ok()) return generation.status();
  r.generation.value = *generation;
  if (Status s = reader->Finish(); !s.ok()) return s;
  return r;
}

}  // namespace wk
