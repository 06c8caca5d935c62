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
  auto token = BearerToken(header);
  if (!token.ok()) return token.status();
  return ParseToken(*token);
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
    : env_(env),
      store_(store.ForPurpose(BucketPurpose::kControl)),
      options_(options),
      unknown_reads_left_(options.unknown_reads_burst),
      unknown_reads_refilled_at_(env.MonoNow()) {
  WK_CHECK(options_.cache_ttl > Duration(0) && options_.max_cache_entries > 0 && options_.max_unknown_entries > 0 &&
               options_.unknown_reads_burst >= 1 && options_.unknown_reads_per_second > 0,
           "TenantAuth options");
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
  if (auto it = known_.find(tenant); it != known_.end()) return it->second;
  if (auto it = unknown_.find(tenant); it != unknown_.end()) return it->second.entry;
  auto entry = std::make_shared<Entry>(env_);
  File(tenant, entry);
  return entry;
}

void TenantAuth::File(const std::string& tenant, const std::shared_ptr<Entry>& entry) {
  // Entries in use stay alive through their users' shared_ptrs, so dropping one from
  // either map is safe (at worst one extra GET).
  if (entry->exists || !entry->corrupt.empty()) {
    if (auto it = unknown_.find(tenant); it != unknown_.end()) {
      unknown_order_.erase(it->second.order);
      unknown_.erase(it);
    }
    if (known_.count(tenant) == 0 && known_.size() >= options_.max_cache_entries) {
      // Stale entries first; if every one is fresh (more tenants in use than the cache
      // holds), all of them.
      std::erase_if(known_, [this](const auto& kv) { return !Fresh(*kv.second); });
      if (known_.size() >= options_.max_cache_entries) known_.clear();
    }
    known_[tenant] = entry;
    return;
  }
  known_.erase(tenant);
  if (auto it = unknown_.find(tenant); it != unknown_.end()) {
    it->second.entry = entry;
    return;
  }
  while (unknown_.size() >= options_.max_unknown_entries) {
    unknown_.erase(unknown_order_.front());
    unknown_order_.pop_front();
  }
  unknown_order_.push_back(tenant);
  unknown_.emplace(tenant, Unknown{entry, std::prev(unknown_order_.end())});
}

bool TenantAuth::TakeUnknownRead() {
  const MonoTime now = env_.MonoNow();
  const double elapsed_s = std::chrono::duration<double>(now - unknown_reads_refilled_at_).count();
  unknown_reads_refilled_at_ = now;
  unknown_reads_left_ =
      std::min(options_.unknown_reads_burst, unknown_reads_left_ + elapsed_s * options_.unknown_reads_per_second);
  if (unknown_reads_left_ < 1) return false;
  unknown_reads_left_ -= 1;
  return true;
}

void TenantAuth::GiveBackUnknownRead() {
  unknown_reads_left_ = std::min(options_.unknown_reads_burst, unknown_reads_left_ + 1);
}

Task<Result<std::string>> TenantAuth::Check(ParsedToken token) {
  const std::string presented = Sha256Hex(token.secret);
  std::shared_ptr<Entry> entry = EntryFor(token.tenant);
  if (!Fresh(*entry)) {
    AsyncMutex::Guard guard = co_await entry->mutex.Lock();
    if (!guard.owns()) co_return Cancelled("cancelled while authenticating");
    if (!Fresh(*entry)) {  // nobody refreshed it while we waited
      // A name not known to exist reads from the budget (tokens.h); one that exists never.
      const bool budgeted = !entry->exists && entry->corrupt.empty();
      if (budgeted && !TakeUnknownRead()) {
        ++unknown_refused_;
        co_return Retryable("too many tokens of unknown tenants; retry later");
      }
      const MonoTime sent = env_.MonoNow();
      const std::string key = TenantKey(token.tenant);
      CallOptions call{options_.read_timeout};
      ++reads_;
      auto got = co_await store_.Get(key, call);
      if (budgeted && (got.ok() || got.code() != Code::kNotFound)) GiveBackUnknownRead();
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
      File(token.tenant, entry);
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
