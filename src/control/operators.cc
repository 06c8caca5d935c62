#include "control/operators.h"

#include <openssl/rand.h>

#include <algorithm>
#include <functional>

#include "base/check.h"
#include "base/digest.h"
#include "base/line_format.h"
#include "base/log.h"

namespace wk::control {
namespace {

constexpr std::string_view kOperatorPrefix = "wko.";
constexpr std::size_t kTokenIdBytes = 8;
constexpr std::size_t kSecretBytes = 32;
constexpr std::string_view kNotRecognised = "operator token not recognised (unknown or revoked)";
constexpr std::string_view kMalformed = "malformed operator token: not 'wko.<id>.<secret>'";

bool LabelChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-';
}

struct ParsedOperatorToken {
  std::string token_id;
  std::string secret;
};

Result<ParsedOperatorToken> ParseOperatorToken(std::string_view token) {
  // Messages never quote the token: it holds a secret.
  if (!token.starts_with(kOperatorPrefix)) return InvalidArgument(std::string(kMalformed));
  std::string_view rest = token.substr(kOperatorPrefix.size());
  const std::size_t dot = rest.find('.');
  if (dot == std::string_view::npos) return InvalidArgument(std::string(kMalformed));
  ParsedOperatorToken p{std::string(rest.substr(0, dot)), std::string(rest.substr(dot + 1))};
  if (!IsTokenId(p.token_id) || !detail::IsLowerHex(p.secret, kSecretBytes * 2)) {
    return InvalidArgument(std::string(kMalformed));
  }
  return p;
}

enum class Decision : std::uint8_t { kWrite, kDone };
using Change = std::function<Result<Decision>(OperatorsRecord&)>;

// Read-modify-write of control/operators: created If-None-Match: * when absent, else
// If-Match the version read; re-read after a conflict or an unknown outcome (the change
// then sees whether its earlier write landed), as tenant records are (tenants.cc).
Task<Status> UpdateOperators(ObjectStore& store, Env& env, CallOptions call, Change change) {
  const std::string key(kOperatorsKey);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= kMaxUpdateAttempts; ++attempt) {
    if (attempt > 1) co_await detail::Backoff(env, attempt);
    auto got = co_await store.Get(key, call);
    OperatorsRecord record;
    record.revision = 0;
    Precondition cond = Precondition::IfNoneMatchAny();
    if (got.ok()) {
      auto decoded = DecodeOperatorsRecord(got->body);
      if (!decoded.ok()) co_return decoded.status();
      record = std::move(decoded).value();
      cond = Precondition::IfMatch(got->version);
    } else if (got.code() != Code::kNotFound) {
      if (!detail::IsRetryableRead(got.code())) co_return got.status();
      last = got.status();
      continue;
    }
    auto decision = change(record);
    if (!decision.ok()) co_return decision.status();
    if (*decision == Decision::kDone) co_return Status::Ok();
    record.revision += 1;
    std::string body = EncodeOperatorsRecord(record);
    auto put = co_await store.Put(key, std::move(body), cond, call);
    if (put.ok()) co_return Status::Ok();
    if (put.code() != Code::kPreconditionFailed && !detail::IsRetryableRead(put.code())) co_return put.status();
    last = put.status();
  }
  co_return detail::GaveUp("updating " + std::string(kOperatorsKey), last);
}

}  // namespace

Status ValidateOperatorLabel(std::string_view label) {
  if (label.empty() || label.size() > 63 || !std::all_of(label.begin(), label.end(), LabelChar)) {
    return InvalidArgument("operator token label '" + std::string(label.substr(0, 80)) +
                           "' must be 1-63 of A-Z, a-z, 0-9, '.', '_', '-'");
  }
  return Status::Ok();
}

bool LooksLikeOperatorToken(std::string_view token) { return token.starts_with(kOperatorPrefix); }

std::string EncodeOperatorsRecord(const OperatorsRecord& r) {
  WK_CHECK(r.revision >= 1 && r.tokens.size() <= kMaxOperatorTokens, "encoding an invalid operators record");
  line_format::LineWriter w("operators", 1);
  w.Field("revision", r.revision);
  for (std::size_t i = 0; i < r.tokens.size(); ++i) {
    const OperatorToken& t = r.tokens[i];
    WK_CHECK(IsTokenId(t.entry.id) && detail::IsLowerHex(t.entry.secret_sha256, 64) && ToUnixMs(t.entry.created_at) >= 0 &&
                 ValidateOperatorLabel(t.label).ok(),
             "encoding an invalid operator token");
    for (std::size_t j = 0; j < i; ++j) WK_CHECK(r.tokens[j].entry.id != t.entry.id, "encoding duplicate token ids");
    const std::string created = std::to_string(ToUnixMs(t.entry.created_at));
    w.FieldParts("token", {t.entry.id, t.entry.secret_sha256, created, t.label});
  }
  return std::move(w).Take();
}

Result<OperatorsRecord> DecodeOperatorsRecord(std::string_view body) {
  auto reader = line_format::LineReader::Open(body, "operators", 1, "wasmkeep-operators 1 record " + std::string(kOperatorsKey));
  if (!reader.ok()) return reader.status();
  OperatorsRecord r;
  auto revision = reader->UintField("revision");
  if (!revision.ok()) return revision.status();
  if (*revision == 0) return reader->Corrupt("'revision' is 0 (the first write is revision 1)");
  r.revision = *revision;
  while (!reader->AtEnd()) {
    auto parts = reader->FieldParts("token", 4);
    if (!parts.ok()) return parts.status();
    if (r.tokens.size() == kMaxOperatorTokens) {
      return reader->Corrupt("more than " + std::to_string(kMaxOperatorTokens) + " 'token' lines");
    }
    const std::string_view id = (*parts)[0], hash = (*parts)[1], label = (*parts)[3];
    if (!IsTokenId(id)) return reader->Corrupt("the token id is not 16 lowercase hex characters");
    if (!detail::IsLowerHex(hash, 64)) return reader->Corrupt("the token's hash is not 64 lowercase hex characters");
    auto created_at = line_format::ParseUnixMs((*parts)[2]);
    if (!created_at) return reader->Corrupt("the token's created time is not Unix milliseconds");
    if (!ValidateOperatorLabel(label).ok()) return reader->Corrupt("the token's label breaks the label rule");
    for (const auto& e : r.tokens) {
      if (e.entry.id == id) return reader->Corrupt("token id " + std::string(id) + " is repeated");
    }
    r.tokens.push_back(OperatorToken{TokenEntry{std::string(id), std::string(hash), *created_at}, std::string(label)});
  }
  return r;
}

Task<Result<NewOperatorToken>> AddOperatorToken(ObjectStore& store, Env& env, std::string label, CallOptions call) {
  if (Status s = ValidateOperatorLabel(label); !s.ok()) co_return s;
  std::vector<unsigned char> buf(kSecretBytes);
  if (RAND_bytes(buf.data(), static_cast<int>(buf.size())) != 1) co_return Fatal("OpenSSL RAND_bytes failed");
  const std::string secret = detail::Hex(buf.data(), buf.size());
  OperatorToken token{TokenEntry{env.RandomHex(kTokenIdBytes), Sha256Hex(secret), env.WallNow()}, label};
  Change change = [&token](OperatorsRecord& r) -> Result<Decision> {
    for (const auto& e : r.tokens) {
      if (e.entry.id == token.entry.id) {
        // An earlier attempt of ours landed (a lost reply), or 64 random bits collided.
        if (e == token) return Decision::kDone;
        return Retryable("token id collision; try again");
      }
    }
    if (r.tokens.size() >= kMaxOperatorTokens) {
      return PreconditionFailed("there are " + std::to_string(kMaxOperatorTokens) +
                                " operator tokens, the most there may be: revoke one first");
    }
    r.tokens.push_back(token);
    return Decision::kWrite;
  };
  Status s = co_await UpdateOperators(store, env, call, change);
  if (!s.ok()) co_return s;
  co_return NewOperatorToken{token.entry.id, std::string(kOperatorPrefix) + token.entry.id + "." + secret};
}

Task<Status> RevokeOperatorToken(ObjectStore& store, Env& env, std::string token_id, CallOptions call) {
  if (!IsTokenId(token_id)) {
    co_return InvalidArgument("token id '" + token_id.substr(0, 80) +
                              "' must be 16 lowercase hex characters (see `wasmkeep admin token list`)");
  }
  bool wrote = false;
  Change change = [&token_id, &wrote](OperatorsRecord& r) -> Result<Decision> {
    auto it = std::find_if(r.tokens.begin(), r.tokens.end(), [&](const OperatorToken& e) { return e.entry.id == token_id; });
    if (it == r.tokens.end()) {
      if (wrote) return Decision::kDone;  // our earlier write landed
      return NotFound("no operator token '" + token_id + "'");
    }
    r.tokens.erase(it);
    wrote = true;
    return Decision::kWrite;
  };
  co_return co_await UpdateOperators(store, env, call, change);
}

Task<Result<OperatorsRecord>> ReadOperators(ObjectStore& store, CallOptions call) {
  auto got = co_await store.Get(std::string(kOperatorsKey), call);
  if (!got.ok()) {
    if (got.code() == Code::kNotFound) {
      OperatorsRecord none;
      none.revision = 0;
      co_return none;
    }
    co_return got.status();
  }
  co_return DecodeOperatorsRecord(got->body);
}

// ---- OperatorAuth.

OperatorAuth::OperatorAuth(Env& env, ObjectStore& store, Options options)
    : env_(env), store_(store.ForPurpose(BucketPurpose::kControl)), options_(options), mutex_(env) {
  WK_CHECK(options_.cache_ttl > Duration(0), "OperatorAuth options");
}

Task<Status> OperatorAuth::Authenticate(std::string_view token) {
  auto parsed = ParseOperatorToken(token);
  if (!parsed.ok()) {
    return [](Status s) -> Task<Status> { co_return s; }(parsed.status());
  }
  return Check(std::move(parsed->token_id), Sha256Hex(parsed->secret));
}

Task<Status> OperatorAuth::Check(std::string token_id, std::string presented) {
  auto fresh = [this] { return fetched_at_ && env_.MonoNow() - *fetched_at_ < options_.cache_ttl; };
  if (!fresh()) {
    AsyncMutex::Guard guard = co_await mutex_.Lock();
    if (!guard.owns()) co_return Cancelled("cancelled while authenticating");
    if (!fresh()) {  // nobody refreshed it while we waited
      const MonoTime sent = env_.MonoNow();
      ++reads_;
      auto got = co_await store_.Get(std::string(kOperatorsKey), CallOptions{options_.read_timeout});
      if (got.ok()) {
        auto record = DecodeOperatorsRecord(got->body);
        hashes_.clear();
        corrupt_.clear();
        if (record.ok()) {
          for (const auto& t : record->tokens) hashes_.emplace_back(t.entry.id, t.entry.secret_sha256);
        } else {
          corrupt_ = record.status().message();
          WK_LOG_ERROR("unreadable operators record: operator tokens are refused", {{"error", corrupt_}});
        }
      } else if (got.code() == Code::kNotFound) {
        hashes_.clear();
        corrupt_.clear();
      } else {
        // Never answered from a stale entry: the revocation bound holds when the bucket
        // is unreachable too.
        co_return got.code() == Code::kUnknownOutcome ? Retryable(got.status().message()) : got.status();
      }
      fetched_at_ = sent;
    }
  }
  if (!corrupt_.empty()) co_return Fatal(corrupt_);
  for (const auto& [id, hash] : hashes_) {
    if (id == token_id && ConstantTimeEqual(hash, presented)) co_return Status::Ok();
  }
  co_return NotFound(std::string(kNotRecognised));
}

}  // namespace wk::control
