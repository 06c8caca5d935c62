#include "server/control.h"

#include <openssl/rand.h>

#include <algorithm>
#include <charconv>

#include "base/digest.h"
#include "base/log.h"
#include "cluster/owner_record.h"

namespace wk::control {
namespace {

constexpr std::string_view kTenantHeader = "wasmkeep-tenant 1";
constexpr std::string_view kSecretHeader = "wasmkeep-secret 1";
constexpr std::string_view kClassHeader = "wasmkeep-class 1";
constexpr std::string_view kTokenPrefix = "wk.";
constexpr std::size_t kTokenIdBytes = 8;   // 16 hex characters: unique within a tenant
constexpr std::size_t kSecretBytes = 32;   // 256 bits: never guessed
// One message for every well-formed token that does not open its tenant: the caller
// learns nothing about which part was wrong.
constexpr std::string_view kNotRecognised = "token not recognised (unknown tenant, unknown or revoked token)";

std::string Hex(const unsigned char* data, std::size_t n) {
  return ToHex(std::string_view(reinterpret_cast<const char*>(data), n));
}

bool IsLowerHex(std::string_view s, std::size_t n) {
  if (s.size() != n) return false;
  return std::all_of(s.begin(), s.end(), [](char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); });
}

bool IsTokenId(std::string_view s) { return IsLowerHex(s, kTokenIdBytes * 2); }

// Random bytes for a secret, from OpenSSL's CSPRNG (never Env's generator).
Result<std::string> SecretHex(std::size_t bytes) {
  std::vector<unsigned char> buf(bytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) return Fatal("OpenSSL RAND_bytes failed");
  return Hex(buf.data(), buf.size());
}

// A decimal without sign or leading zeros, as the formats write it.
bool ParseUint(std::string_view s, std::uint64_t* out) {
  if (s.empty() || s.size() > 20 || (s.size() > 1 && s[0] == '0')) return false;
  if (!std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; })) return false;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), *out);
  return ec == std::errc() && p == s.data() + s.size();
}

bool ParseMs(std::string_view s, WallTime* out) {
  std::uint64_t ms = 0;
  if (!ParseUint(s, &ms) || ms > static_cast<std::uint64_t>(INT64_MAX)) return false;
  *out = FromUnixMs(static_cast<std::int64_t>(ms));
  return true;
}

// The lines of a newline-terminated body, without their newlines; nullopt if the body is
// empty or does not end in a newline.
std::optional<std::vector<std::string_view>> Lines(std::string_view body) {
  if (body.empty() || body.back() != '\n') return std::nullopt;
  std::vector<std::string_view> lines;
  while (!body.empty()) {
    std::size_t nl = body.find('\n');
    lines.push_back(body.substr(0, nl));
    body.remove_prefix(nl + 1);
  }
  return lines;
}

// The value of "name value", or nullopt.
std::optional<std::string_view> Field(std::string_view line, std::string_view name) {
  if (line.size() <= name.size() || !line.starts_with(name) || line[name.size()] != ' ') return std::nullopt;
  return line.substr(name.size() + 1);
}

std::vector<std::string_view> SplitSpaces(std::string_view s) {
  std::vector<std::string_view> parts;
  while (true) {
    std::size_t sp = s.find(' ');
    parts.push_back(s.substr(0, sp));
    if (sp == std::string_view::npos) break;
    s.remove_prefix(sp + 1);
  }
  return parts;
}

bool IsRetryableRead(Code c) { return c == Code::kRetryable || c == Code::kUnknownOutcome; }

// A random pause before retry number `attempt` (2, 3, ...), so racing writers spread out.
Task<void> Backoff(Env& env, int attempt) {
  const auto step_ns = static_cast<std::uint64_t>(kRetryBackoffStep.count());
  const Duration pause(static_cast<Duration::rep>(env.RandomBelow(step_ns * static_cast<std::uint64_t>(attempt)) + 1));
  (void)co_await env.SleepFor(pause);
}

Status GaveUp(const std::string& what, const Status& last) {
  if (last.code() == Code::kUnknownOutcome) return UnknownOutcome(what + ": " + last.message());
  return Retryable(what + " after " + std::to_string(kMaxUpdateAttempts) + " attempts: " + last.message());
}

Status CorruptTenant(std::string_view tenant, const std::string& what) {
  return Fatal("corrupt wasmkeep-tenant 1 record " + TenantKey(tenant) + ": " + what);
}

Result<NewToken> MintToken(Env& env, const std::string& tenant, TokenEntry* entry) {
  auto secret = SecretHex(kSecretBytes);
  if (!secret.ok()) return secret.status();
  entry->id = env.RandomHex(kTokenIdBytes);
  entry->secret_sha256 = Sha256Hex(*secret);
  entry->created_at = env.WallNow();
  return NewToken{tenant, entry->id, std::string(kTokenPrefix) + tenant + "." + entry->id + "." + *secret};
}

bool HasToken(const TenantRecord& r, const TokenEntry& t) {
  return std::any_of(r.tokens.begin(), r.tokens.end(),
                     [&](const TokenEntry& e) { return e.id == t.id && e.secret_sha256 == t.secret_sha256; });
}

// What a change to a tenant record decided, given the record as read.
enum class Decision : std::uint8_t { kWrite, kDone };
using Change = std::function<Result<Decision>(TenantRecord&)>;

// Read-modify-write of a tenant record with If-Match, re-reading on a conflict and after
// an unknown outcome (the change then sees whether its earlier write landed).
Task<Status> UpdateTenant(ObjectStore& store, Env& env, std::string tenant, CallOptions call, Change change) {
  const std::string key = TenantKey(tenant);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) co_return NotFound("no tenant '" + tenant + "'");
      if (!IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    auto record = DecodeTenantRecord(got->body, tenant);
    if (!record.ok()) co_return record.status();
    auto decision = change(*record);
    if (!decision.ok()) co_return decision.status();
    if (*decision == Decision::kDone) co_return Status::Ok();
    record->revision += 1;
    std::string body = EncodeTenantRecord(*record);
    Precondition cond = Precondition::IfMatch(got->version);
    auto put = co_await store.Put(key, std::move(body), cond, call);
    if (put.ok()) co_return Status::Ok();
    if (put.code() != Code::kPreconditionFailed && !IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return GaveUp("updating tenant '" + tenant + "'", last);
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

Status ValidateClassArgs(const std::string& tenant, const std::string& class_name) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) return s;
  return ValidateClassName(class_name);
}

// Every key under prefix, in byte order.
Task<Result<std::vector<std::string>>> ListKeys(ObjectStore& store, std::string prefix, CallOptions call) {
  std::vector<std::string> keys;
  ListOptions options;
  options.prefix = prefix;
  for (int pages = 0; pages < kMaxListPages; ++pages) {
    auto page = co_await store.List(options, call);
    if (!page.ok()) co_return page.status();
    for (auto& e : page->entries) keys.push_back(std::move(e.key));
    if (!page->next_continuation) co_return keys;
    options.continuation = *page->next_continuation;
  }
  co_return Fatal("more than " + std::to_string(kMaxListPages) + " pages under " + prefix);
}


}  // namespace

// ---- Names and keys.

Status ValidateTenantName(std::string_view tenant) {
  ActorId probe{std::string(tenant), "c", "n"};
  return ValidateActorId(probe);
}

Status ValidateClassName(std::string_view class_name) {
  ActorId probe{"t", std::string(class_name), "n"};
  return ValidateActorId(probe);
}

ModuleDigest ModuleDigest::Of(std::string_view bytes) { return ModuleDigest{Sha256Hex(bytes)}; }

Status ValidateModuleDigest(const ModuleDigest& digest) {
  if (!IsLowerHex(digest.hex, 64)) {
    return InvalidArgument("module digest '" + digest.hex.substr(0, 80) + "' must be 64 lowercase hex characters (SHA-256)");
  }
  return Status::Ok();
}

std::string ModuleKey(std::string_view tenant, std::string_view class_name, const ModuleDigest& digest) {
  return std::string(kClassesPrefix) + std::string(tenant) + "/" + std::string(class_name) + "/modules/" + digest.hex;
}

std::string ClassPointerKey(std::string_view tenant, std::string_view class_name) {
  return std::string(kClassesPrefix) + std::string(tenant) + "/" + std::string(class_name) + "/current";
}

// ---- Tenant records.

std::string EncodeTenantRecord(const TenantRecord& r) {
  WK_CHECK(ValidateTenantName(r.tenant).ok(), "encoding a tenant record with a bad name");
  WK_CHECK(r.revision >= 1 && r.tokens.size() <= kMaxTokensPerTenant, "encoding an invalid tenant record");
  std::string out(kTenantHeader);
  out += "\ntenant " + r.tenant;
  out += "\ncreated_at " + std::to_string(ToUnixMs(r.created_at));
  out += "\nrevision " + std::to_string(r.revision);
  for (std::size_t i = 0; i < r.tokens.size(); ++i) {
    const TokenEntry& t = r.tokens[i];
    WK_CHECK(IsTokenId(t.id) && IsLowerHex(t.secret_sha256, 64) && ToUnixMs(t.created_at) >= 0,
             "encoding an invalid token entry");
    for (std::size_t j = 0; j < i; ++j) WK_CHECK(r.tokens[j].id != t.id, "encoding duplicate token ids");
    out += "\ntoken " + t.id + " " + t.secret_sha256 + " " + std::to_string(ToUnixMs(t.created_at));
  }
  out += "\n";
  return out;
}

Result<TenantRecord> DecodeTenantRecord(std::string_view body, std::string_view tenant) {
  auto lines = Lines(body);
  if (!lines) return CorruptTenant(tenant, "not newline-terminated");
  if (lines->size() < 4 || (*lines)[0] != kTenantHeader) return CorruptTenant(tenant, "bad header");
  if (lines->size() > 4 + kMaxTokensPerTenant) return CorruptTenant(tenant, "too many tokens");
  TenantRecord r;
  auto name = Field((*lines)[1], "tenant");
  if (!name || *name != tenant) return CorruptTenant(tenant, "line 2 does not name this tenant");
  r.tenant = std::string(tenant);
  auto created = Field((*lines)[2], "created_at");
  if (!created || !ParseMs(*created, &r.created_at)) return CorruptTenant(tenant, "bad created_at");
  auto revision = Field((*lines)[3], "revision");
  if (!revision || !ParseUint(*revision, &r.revision) || r.revision == 0) return CorruptTenant(tenant, "bad revision");
  for (std::size_t i = 4; i < lines->size(); ++i) {
    auto token = Field((*lines)[i], "token");
    if (!token) return CorruptTenant(tenant, "line " + std::to_string(i + 1) + " is not 'token ...'");
    auto parts = SplitSpaces(*token);
    TokenEntry t;
    if (parts.size() != 3 || !IsTokenId(parts[0]) || !IsLowerHex(parts[1], 64) || !ParseMs(parts[2], &t.created_at)) {
      return CorruptTenant(tenant, "bad token line " + std::to_string(i + 1));
    }
    t.id = std::string(parts[0]);
    t.secret_sha256 = std::string(parts[1]);
    for (const auto& e : r.tokens) {
      if (e.id == t.id) return CorruptTenant(tenant, "duplicate token id " + t.id);
    }
    r.tokens.push_back(std::move(t));
  }
  return r;
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
  if (!ValidateTenantName(p.tenant).ok() || !IsTokenId(p.token_id) || !IsLowerHex(p.secret, kSecretBytes * 2)) {
    return InvalidArgument("malformed token: not 'wk.<tenant>.<id>.<secret>'");
  }
  return p;
}

Task<Result<NewToken>> CreateTenant(ObjectStore& store, Env& env, std::string tenant, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  TenantRecord record;
  record.tenant = tenant;
  record.created_at = env.WallNow();
  TokenEntry entry;
  auto token = MintToken(env, tenant, &entry);
  if (!token.ok()) co_return token.status();
  record.tokens.push_back(entry);
  const std::string key = TenantKey(tenant);
  const std::string body = EncodeTenantRecord(record);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    std::string copy = body;
    Precondition cond = Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(key, std::move(copy), cond, call);
    if (put.ok()) co_return std::move(token).value();
    if (put.code() != Code::kPreconditionFailed) {
      if (!IsRetryableRead(put.code())) co_return put.status();
      last = put.status();
      continue;  // a retried create meets our own landed write as a precondition failure
    }
    // It exists: ours (an earlier attempt whose reply was lost) or someone else's.
    auto got = co_await store.Get(key, call);
    if (got.ok()) {
      auto existing = DecodeTenantRecord(got->body, tenant);
      if (existing.ok() && HasToken(*existing, entry)) co_return std::move(token).value();
      co_return PreconditionFailed("tenant '" + tenant + "' already exists");
    }
    if (got.code() != Code::kNotFound && !IsRetryableRead(got.code())) co_return got.status();
    last = got.status();
  }
  co_return GaveUp("creating tenant '" + tenant + "'", last);
}

Task<Result<NewToken>> AddToken(ObjectStore& store, Env& env, std::string tenant, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  TokenEntry entry;
  auto token = MintToken(env, tenant, &entry);
  if (!token.ok()) co_return token.status();
  Change change = [&entry](TenantRecord& r) -> Result<Decision> {
    if (HasToken(r, entry)) return Decision::kDone;  // an earlier attempt landed
    for (const auto& e : r.tokens) {
      // 64 random bits colliding: refuse rather than loop; the caller runs it again.
      if (e.id == entry.id) return Retryable("token id collision; try again");
    }
    if (r.tokens.size() >= kMaxTokensPerTenant) {
      return PreconditionFailed("tenant '" + r.tenant + "' has " + std::to_string(kMaxTokensPerTenant) +
                                " tokens, the most it may have: revoke one first");
    }
    r.tokens.push_back(entry);
    return Decision::kWrite;
  };
  Status s = co_await UpdateTenant(store, env, tenant, call, change);
  if (!s.ok()) co_return s;
  co_return std::move(token).value();
}

Task<Status> RevokeToken(ObjectStore& store, Env& env, std::string tenant, std::string token_id, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  if (!IsTokenId(token_id)) {
    co_return InvalidArgument("token id '" + token_id.substr(0, 80) + "' must be 16 lowercase hex characters (see `wasmkeep tenant list`)");
  }
  bool wrote = false;
  Change change = [&token_id, &wrote](TenantRecord& r) -> Result<Decision> {
    auto it = std::find_if(r.tokens.begin(), r.tokens.end(), [&](const TokenEntry& e) { return e.id == token_id; });
    if (it == r.tokens.end()) {
      // After a write of ours (lost reply, or a conflict with another revocation) it is
      // gone either way.
      if (wrote) return Decision::kDone;
      return NotFound("tenant '" + r.tenant + "' has no token '" + token_id + "'");
    }
    r.tokens.erase(it);
    wrote = true;
    return Decision::kWrite;
  };
  co_return co_await UpdateTenant(store, env, tenant, call, change);
}

Task<Result<TenantRecord>> ReadTenant(ObjectStore& store, std::string tenant, CallOptions call) {
  if (Status s = ValidateTenantName(tenant); !s.ok()) co_return s;
  const std::string key = TenantKey(tenant);
  auto got = co_await store.Get(key, call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return NotFound("no tenant '" + tenant + "'");
    co_return got.status();
  }
  co_return DecodeTenantRecord(got->body, tenant);
}

Task<Result<std::vector<TenantSummary>>> ListTenants(ObjectStore& store, CallOptions call) {
  std::string prefix(kTenantsPrefix);
  auto keys = co_await ListKeys(store, prefix, call);
  if (!keys.ok()) co_return keys.status();
  std::vector<TenantSummary> out;
  for (const std::string& key : *keys) {
    TenantSummary summary;
    summary.tenant = key.substr(kTenantsPrefix.size());
    if (!ValidateTenantName(summary.tenant).ok()) {
      summary.error = "not a tenant name (key " + key + ")";
      out.push_back(std::move(summary));
      continue;
    }
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;  // removed since the listing
      co_return got.status();
    }
    auto record = DecodeTenantRecord(got->body, summary.tenant);
    if (record.ok()) {
      summary.record = std::move(record).value();
    } else {
      summary.error = record.status().message();
    }
    out.push_back(std::move(summary));
  }
  co_return out;
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
  if (it == entry->hashes.end() || !ConstantTimeEqual(it->second, presented)) {
    co_return NotFound(std::string(kNotRecognised));
  }
  co_return token.tenant;
}

// ---- The cluster secret.

std::string ClusterSecret::Sign(std::string_view message) const {
  return ToHex(HmacSha256(std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()), message));
}

bool ClusterSecret::Verify(std::string_view message, std::string_view mac_hex) const {
  const std::string expected = Sign(message);
  return ConstantTimeEqual(expected, mac_hex);
}

std::string EncodeClusterSecret(const ClusterSecret& secret, WallTime created_at) {
  return std::string(kSecretHeader) + "\nsecret " + Hex(secret.bytes.data(), secret.bytes.size()) +
         "\ncreated_at " + std::to_string(ToUnixMs(created_at)) + "\n";
}

Result<ClusterSecret> DecodeClusterSecret(std::string_view body) {
  auto corrupt = [](const std::string& what) {
    return Fatal("corrupt wasmkeep-secret 1 object " + std::string(kClusterSecretKey) + ": " + what);
  };
  auto lines = Lines(body);
  if (!lines || lines->size() != 3 || (*lines)[0] != kSecretHeader) return corrupt("bad header or not three lines");
  auto hex = Field((*lines)[1], "secret");
  if (!hex || !IsLowerHex(*hex, 64)) return corrupt("bad secret line");
  WallTime created;
  auto created_field = Field((*lines)[2], "created_at");
  if (!created_field || !ParseMs(*created_field, &created)) return corrupt("bad created_at");
  ClusterSecret secret;
  for (std::size_t i = 0; i < secret.bytes.size(); ++i) {
    auto nibble = [](char c) { return c <= '9' ? c - '0' : c - 'a' + 10; };
    secret.bytes[i] = static_cast<std::uint8_t>(nibble((*hex)[2 * i]) << 4 | nibble((*hex)[2 * i + 1]));
  }
  return secret;
}

Task<Result<ClusterSecret>> EnsureClusterSecret(ObjectStore& store, Env& env, CallOptions call) {
  const std::string key(kClusterSecretKey);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    auto got = co_await store.Get(key, call);
    if (got.ok()) co_return DecodeClusterSecret(got->body);  // corrupt: kFatal, never replaced
    if (got.code() != Code::kNotFound) {
      if (!IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    ClusterSecret fresh;
    if (RAND_bytes(fresh.bytes.data(), static_cast<int>(fresh.bytes.size())) != 1) {
      co_return Fatal("OpenSSL RAND_bytes failed");
    }
    std::string body = EncodeClusterSecret(fresh, env.WallNow());
    Precondition cond = Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(key, std::move(body), cond, call);
    if (put.ok()) {
      WK_LOG_INFO("created the cluster secret", {{"key", key}});
      co_return fresh;
    }
    // Another node won the race, or our write's outcome is unknown: read back next round.
    if (put.code() != Code::kPreconditionFailed && !IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return GaveUp("reading or creating " + key, last);
}

// ---- Classes.

std::string EncodeClassPointer(std::string_view tenant, std::string_view class_name, const ClassVersion& v) {
  WK_CHECK(ValidateTenantName(tenant).ok() && ValidateClassName(class_name).ok() && ValidateModuleDigest(v.module).ok(),
           "encoding an invalid class pointer");
  return std::string(kClassHeader) + "\nclass " + std::string(tenant) + "/" + std::string(class_name) + "\nmodule " +
         v.module.hex + "\nsize " + std::to_string(v.size_bytes) + "\ndeployed_at " +
         std::to_string(ToUnixMs(v.deployed_at)) + "\n";
}

Result<ClassVersion> DecodeClassPointer(std::string_view body, std::string_view tenant, std::string_view class_name) {
  auto corrupt = [&](const std::string& what) {
    return Fatal("corrupt wasmkeep-class 1 pointer " + ClassPointerKey(tenant, class_name) + ": " + what);
  };
  auto lines = Lines(body);
  if (!lines || lines->size() != 5 || (*lines)[0] != kClassHeader) return corrupt("bad header or not five lines");
  auto cls = Field((*lines)[1], "class");
  if (!cls || *cls != std::string(tenant) + "/" + std::string(class_name)) return corrupt("does not name this class");
  ClassVersion v;
  auto module = Field((*lines)[2], "module");
  if (!module || !IsLowerHex(*module, 64)) return corrupt("bad module line");
  v.module.hex = std::string(*module);
  auto size = Field((*lines)[3], "size");
  if (!size || !ParseUint(*size, &v.size_bytes) || v.size_bytes == 0 || v.size_bytes > kMaxModuleBytes) {
    return corrupt("bad size");
  }
  auto deployed = Field((*lines)[4], "deployed_at");
  if (!deployed || !ParseMs(*deployed, &v.deployed_at)) return corrupt("bad deployed_at");
  return v;
}

Task<Result<ClassVersion>> DeployClass(ObjectStore& store, Env& env, std::string tenant, std::string class_name,
                                       std::string wasm_bytes, CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  if (wasm_bytes.empty()) co_return InvalidArgument("the module is empty");
  if (wasm_bytes.size() > kMaxModuleBytes) {
    co_return InvalidArgument("the module is " + std::to_string(wasm_bytes.size()) + " bytes, over the limit of " +
                              std::to_string(kMaxModuleBytes));
  }
  // The tenant must exist (and be readable): a class of no tenant could never be called.
  auto record = co_await ReadTenant(store, tenant, call);
  if (!record.ok()) co_return record.status();

  ClassVersion version{ModuleDigest::Of(wasm_bytes), wasm_bytes.size(), env.WallNow()};
  const std::string module_key = ModuleKey(tenant, class_name, version.module);
  bool stored = false;
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts && !stored; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    std::string body = wasm_bytes;
    Precondition create = Precondition::IfNoneMatchAny();
    auto put = co_await store.Put(module_key, std::move(body), create, call);
    if (put.ok()) {
      stored = true;
      break;
    }
    if (put.code() != Code::kPreconditionFailed) {
      if (!IsRetryableRead(put.code())) co_return put.status();
      last = put.status();
      continue;
    }
    // Already there (an earlier deploy of the same bytes, or our own lost reply). Check it:
    // the pointer must name a module that reads back whole.
    auto got = co_await store.Get(module_key, call);
    if (!got.ok()) {
      if (got.code() != Code::kNotFound && !IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    if (got->body == wasm_bytes) {
      stored = true;
      break;
    }
    WK_LOG_WARN("replacing a corrupt stored module", {{"key", module_key}});
    std::string repair = wasm_bytes;
    Precondition same = Precondition::IfMatch(got->version);
    auto fixed = co_await store.Put(module_key, std::move(repair), same, call);
    if (fixed.ok()) {
      stored = true;
      break;
    }
    if (fixed.code() != Code::kPreconditionFailed && !IsRetryableRead(fixed.code())) co_return fixed.status();
    last = fixed.status();
  }
  if (!stored) co_return GaveUp("storing " + module_key, last);

  // Only now that the module is stored does the pointer name it.
  const std::string pointer_key = ClassPointerKey(tenant, class_name);
  const std::string pointer = EncodeClassPointer(tenant, class_name, version);
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await Backoff(env, attempt);
    std::string body = pointer;
    Precondition none = Precondition::None();
    auto put = co_await store.Put(pointer_key, std::move(body), none, call);
    if (put.ok()) co_return version;
    // Rewriting the same pointer is harmless, so an unknown outcome is simply retried.
    if (!IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return GaveUp("writing " + pointer_key, last);
}

Task<Result<std::optional<ClassVersion>>> CurrentClass(ObjectStore& store, std::string tenant, std::string class_name,
                                                       CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  const std::string key = ClassPointerKey(tenant, class_name);
  auto got = co_await store.Get(key, call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return std::optional<ClassVersion>();
    co_return got.status();
  }
  auto v = DecodeClassPointer(got->body, tenant, class_name);
  if (!v.ok()) co_return v.status();
  co_return std::optional<ClassVersion>(std::move(v).value());
}

Task<Result<std::string>> ReadModule(ObjectStore& store, std::string tenant, std::string class_name,
                                     ModuleDigest digest, CallOptions call) {
  if (Status s = ValidateClassArgs(tenant, class_name); !s.ok()) co_return s;
  if (Status s = ValidateModuleDigest(digest); !s.ok()) co_return s;
  const std::string key = ModuleKey(tenant, class_name, digest);
  auto got = co_await store.Get(key, call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) co_return NotFound("no module " + key);
    co_return got.status();
  }
  if (got->body.size() > kMaxModuleBytes) co_return Fatal("corrupt module " + key + ": over the size limit");
  const ModuleDigest actual = ModuleDigest::Of(got->body);
  if (actual != digest) co_return Fatal("corrupt module " + key + ": its SHA-256 is " + actual.hex);
  co_return std::move(got->body);
}

Task<Result<std::vector<ClassSummary>>> ListClasses(ObjectStore& store, std::optional<std::string> tenant,
                                                    CallOptions call) {
  std::string prefix(kClassesPrefix);
  if (tenant) {
    if (Status s = ValidateTenantName(*tenant); !s.ok()) co_return s;
    prefix += *tenant + "/";
  }
  auto keys = co_await ListKeys(store, prefix, call);
  if (!keys.ok()) co_return keys.status();
  std::vector<ClassSummary> out;
  for (const std::string& key : *keys) {
    // classes/<tenant>/<class>/current; everything else (modules/...) is skipped.
    std::string_view rest = std::string_view(key).substr(kClassesPrefix.size());
    std::size_t a = rest.find('/');
    std::size_t b = a == std::string_view::npos ? a : rest.find('/', a + 1);
    if (b == std::string_view::npos || rest.substr(b + 1) != "current") continue;
    ClassSummary summary{std::string(rest.substr(0, a)), std::string(rest.substr(a + 1, b - a - 1)), {}, {}};
    if (!ValidateClassArgs(summary.tenant, summary.class_name).ok()) continue;  // not one of ours
    auto got = co_await store.Get(key, call);
    if (!got.ok()) {
      if (got.code() == Code::kNotFound) continue;
      co_return got.status();
    }
    auto v = DecodeClassPointer(got->body, summary.tenant, summary.class_name);
    if (v.ok()) {
      summary.current = std::move(v).value();
    } else {
      summary.error = v.status().message();
    }
    out.push_back(std::move(summary));
  }
  co_return out;
}

}  // namespace wk::control
