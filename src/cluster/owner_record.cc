#include "cluster/owner_record.h"

#include <charconv>

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

Status Corrupt(const std::string& what) { return Fatal("corrupt wasmkeep-owner 1 record: " + what); }

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
  std::string out(kHeader);
  if (r.names_nobody()) {
    WK_CHECK(r.instance.empty(), "a record naming nobody has no instance");
    out += "\nowner nobody";
  } else {
    WK_CHECK(ValidateNodeId(r.node_id).ok() && IsInstance(r.instance), "encoding an invalid owner record");
    out += "\nowner " + r.node_id + " " + r.instance;
  }
  out += "\ngeneration " + std::to_string(r.generation.value) + "\n";
  return out;
}

Result<OwnerRecord> DecodeOwnerRecord(std::string_view body) {
  if (body.substr(0, body.find('\n')) != kHeader) return Corrupt("bad header");
  if (body.empty() || body.back() != '\n') return Corrupt("not newline-terminated");
  std::string_view rest = body.substr(kHeader.size() + 1);
  std::size_t nl = rest.find('\n');
  std::string_view owner = rest.substr(0, nl);
  std::string_view gen_line = rest.substr(nl + 1);
  if (gen_line.empty() || gen_line.back() != '\n' || gen_line.find('\n') != gen_line.size() - 1) {
    return Corrupt("expected exactly three lines");
  }
  gen_line.remove_suffix(1);
  OwnerRecord r;
  if (!owner.starts_with("owner ")) return Corrupt("line 2 is not 'owner ...'");
  owner.remove_prefix(6);
  if (owner != "nobody") {
    std::size_t sp = owner.find(' ');
    if (sp == std::string_view::npos) return Corrupt("owner line needs a node and an instance");
    r.node_id = std::string(owner.substr(0, sp));
    r.instance = std::string(owner.substr(sp + 1));
    if (!ValidateNodeId(r.node_id).ok() || !IsInstance(r.instance)) return Corrupt("bad node id or instance");
  }
  if (!gen_line.starts_with("generation ")) return Corrupt("line 3 is not 'generation N'");
  gen_line.remove_prefix(11);
  if (gen_line.empty() || gen_line.size() > 20 || (gen_line.size() > 1 && gen_line[0] == '0')) return Corrupt("bad generation");
  for (char c : gen_line)
    if (c < '0' || c > '9') return Corrupt("bad generation");
  auto [p, ec] = std::from_chars(gen_line.data(), gen_line.data() + gen_line.size(), r.generation.value);
  if (ec != std::errc()) return Corrupt("generation out of range");
  return r;
}

}  // namespace wk
