#include "base/ids.h"

namespace wk {
namespace {

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

Status ValidateSystemActorId(const ActorId& id) {
  if (id.tenant.size() < 2 || id.tenant[0] != '_' || !TenantOrClassOk(id.tenant.substr(1))) {
    return InvalidArgument("a system actor's tenant is '_' followed by a tenant name");
  }
  return ValidateActorId(ActorId{id.tenant.substr(1), id.class_name, id.name});
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

Status ValidateNodeId(std::string_view id) {
  if (id.empty() || id.size() > 64) return InvalidArgument("node id must be 1 to 64 characters");
  if (id == "." || id == "..") return InvalidArgument("node id cannot be '.' or '..'");
  for (char c : id) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    if (!ok) {
      return InvalidArgument("node id '" + std::string(id) + "' may contain only letters, digits, '.', '_' and '-'");
    }
  }
  return Status::Ok();
}

}  // namespace wk
