#include "control/tokens.h"

#include <openssl/crypto.h>
#include <openssl/rand.h>

#include <algorithm>

#include "base/digest.h"
#include "base/log.h"
#include "control/common.h"
#include "control/tenants.h"

namespace wk::control {
namespace {


constexpr std::string_view kTokenPrefix = "wk.";
constexpr std::size_t kTokenIdBytes = 8;   // 16 hex characters: unique within a tenant
constexpr std::size_t kSecretBytes = 32;   // 256 bits: never guessed
// One message for every well-formed token that does not open its tenant: the caller
// learns nothing about which part was wrong.
constexpr std::string_view kNotRecognised = "token not recognised (unknown tenant, unknown or revoked token)";

// Random bytes for a secret, from OpenSSL's CSPRNG (never Env's generator).
Result<std::string> SecretHex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) return Fatal("OpenSSL RAND_bytes failed");
  return detail::Hex(buf.data(), buf.size());
}

Result<ParsedToken> ParseAuthorization(std::string_view header) {
  if (header.empty()) return InvalidArgument("no Authorization header");
  std::size_t sp = header.find(' ');
  std::string_view scheme = header.substr(0, sp);
  auto lower = [](char c) { return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c; };
  if (sp == std::string_view::npos || scheme.size() != 6 ||
      !std::equal(scheme.begin(), scheme.end(), "bearer", [&](char a, char b) { return lower(a) == b; })) {
    return InvalidArgument("Authorization is not 'Bearer <token>'");
  }
  std::string_view token = header.substr(sp + 1);
  while (!token.empty() && (token.front() == ' ' || token.front() == '\t')) token.remove_prefix(1);
  while (!token.empty() && (token.back() == ' ' || token.back() == '\t')) token.remove_suffix(1);
  return ParseToken(token);
}

Task<Result<std::string>> Answer(Result<std::string> result) { co_return result; }

}  // namespace

bool IsTokenId(std::string_view s) { return detail::IsLowerHex(s, kTokenIdBytes * 2); }

Result<NewToken> MintToken(Env& env, const std::string& tenant, TokenEntry* entry) {
  auto secret = SecretHex(kSecretBytes);
  if (!secret.ok()) return secret.status();
  entry->id = env.RandomHex(kTokenIdBytes);
  entry->secret_sha256 = Sha256Hex(*secret);
  entry->created_at = env.WallNow();
  return NewToken{tenant, entry->id, std::string(kTokenPrefix) + tenant + "." + entry->id + "." + *secret};
}

Result<ParsedToken> ParseToken(std::string_view token) {
  // Messages never quote the token: it holds a secret.
  if (!token.starts_with(kTokenPrefix)) return InvalidArgument("malformed token: not 'wk.<tenant>.<id>.<secret>'");
  std::string_view rest = token.substr(kTokenPrefix.size());
  std::size_t a = rest.find('.');
  std::size_t b = a == std::string_view::npos ? a : rest.find('.', a + 1);
  if (a == std::string_view::npos || b == std::string_view::npos || rest.find('.', b + 1) != std::string_view::npos) {
    return InvalidArgument("malformed token: not 'wk.<tenant>.<id>.<secret>'");
  }
  ParsedToken p{std::string(rest.substr(0, a)), std::string(rest.substr(a + 1, b - a - 1)), std::string(rest.substr(b + 1))};
  if (!ValidateTenantName(p.tenant).ok() || !IsTokenId(p.token_id) || !detail::IsLowerHex(p.secret, kSecretBytes * 2)) {
    return InvalidArgument("malformed token: not 'wk.<tenant>.<id>.<secret>'");
  }
  return p;
}

// ---- TenantAuth.

TenantAuth::TenantAuth(Env& env, ObjectStore& store, Options options)
    : env_(env), store_(store), options_(options) {
  WK_CHECK(options_.cache_ttl > Duration(0) && options_.max_cache_entries > 0, "TenantAuth options");
}

Task<Result<std::string>> TenantAuth::Authenticate(std::string_view authorization_header_value) {
  auto token = ParseAuthorization(authorization_header_value);
  if (!token.ok()) return Answer(token.status());
  return Check(std::move(token).value());
}

bool TenantAuth::Fresh(const Entry& e) const {
  return e.fetched_at && env_.MonoNow() - *e.fetched_at < options_.cache_ttl;
}

std::shared_ptr<TenantAuth::Entry> TenantAuth::EntryFor(const std::string& tenant) {
  if (auto it = cache_.find(tenant); it != cache_.end()) return it->second;
  if (cache_.size() >= options_.max_cache_entries) {
    // Stale entries first; if every entry is fresh, all of them. Entries in use stay alive
    // through their users' shared_ptrs, so dropping them is safe (at worst one extra GET).
    std::erase_if(cache_, [this](const auto& kv) { return !Fresh(*kv.second); });
    if (cache_.size() >= options_.max_cache_entries) cache_.clear();
  }
  auto entry = std::make_shared<Entry>(env_);
  cache_.emplace(tenant, entry);
  return entry;
}

Task<Result<std::string>> TenantAuth::Check(ParsedToken token) {
  const std::string presented = Sha256Hex(token.secret);
  std::shared_ptr<Entry> entry = EntryFor(token.tenant);
  if (!Fresh(*entry)) {
    AsyncMutex::Guard guard = co_await entry->mutex.Lock();
    if (!guard.owns()) co_return Cancelled("cancelled while authenticating");
    if (!Fresh(*entry)) {  // nobody refreshed it while we waited
      const MonoTime sent = env_.MonoNow();
      const std::string key = TenantKey(token.tenant);
      CallOptions call{options_.read_timeout};
      ++reads_;
      auto got = co_await store_.Get(key, call);
      if (got.ok()) {
        auto record = DecodeTenantRecord(got->body, token.tenant);
        entry->hashes.clear();
        entry->exists = true;
        entry->corrupt.clear();
        if (record.ok()) {
          for (const auto& t : record->tokens) entry->hashes.emplace(t.id, t.secret_sha256);
        } else {
          entry->corrupt = record.status().message();
          WK_LOG_ERROR("unreadable tenant record: requests for this tenant fail",
                       {{"tenant", token.tenant}, {"error", entry->corrupt}});
        }
      } else if (got.code() == Code::kNotFound) {
        entry->hashes.clear();
        entry->exists = false;
        entry->corrupt.clear();
      } else {
        // Never answered from a stale entry: the revocation bound holds even when the
        // bucket is unreachable.
        co_return got.code() == Code::kUnknownOutcome ? Retryable(got.status().message()) : got.status();
      }
      entry->fetched_at = sent;
    }
  }
  if (!entry->corrupt.empty()) co_return Fatal(entry->corrupt);
  if (!entry->exists) co_return NotFound(std::string(kNotRecognised));
  auto it = entry->hashes.find(token.token_id);
  if (it == entry->hashes.end() || !::wk::ConstantTimeEqual(it->second, presented)) {
    co_return NotFound(std::string(kNotRecognised));
  }
  co_return token.tenant;
}

}  // namespace wk::control
