#include "store/s3/s3_store.h"

#include <algorithm>
#include <boost/beast/http/verb.hpp>
#include <charconv>
#include <ctime>

#include "store/s3/s3_xml.h"
#include "store/s3/sigv4.h"

namespace wk {

namespace http = boost::beast::http;

struct S3Store::Shared {
  Shared(RealEnv& e, S3Config c, std::unique_ptr<HttpClient> h)
      : env(e), cfg(std::move(c)), creds{cfg.access_key, cfg.secret_key, cfg.session_token},
        client(std::move(h)) {}

  RealEnv& env;
  const S3Config cfg;
  const SigV4Credentials creds;
  // Never null. Shut down (not destroyed) with the S3Store, so that calls still running
  // can finish against it.
  const std::unique_ptr<HttpClient> client;
};

namespace {

using Shared = S3Store::Shared;

enum class S3Op : std::uint8_t { kGet, kHead, kPut, kDelete, kList, kCreateBucket };

bool IsWrite(S3Op op) {
  return op == S3Op::kPut || op == S3Op::kDelete || op == S3Op::kCreateBucket;
}

std::string_view MethodName(S3Op op) {
  switch (op) {
    case S3Op::kGet: return "GET";
    case S3Op::kHead: return "HEAD";
    case S3Op::kPut: return "PUT";
    case S3Op::kDelete: return "DELETE";
    case S3Op::kList: return "LIST";
    case S3Op::kCreateBucket: return "CREATE BUCKET";
  }
  return "?";
}

// One S3 request, before signing (it is signed again for every attempt, with a fresh
// x-amz-date).
struct S3Call {
  S3Op op = S3Op::kGet;
  http::verb method = http::verb::get;
  std::string key;           // empty: the bucket itself
  HttpParams query;          // decoded; encoded and sorted when signing
  HttpHeaders headers;       // signed, in addition to host/x-amz-*
  std::string body;
  std::string payload_hash;  // hex SHA-256 of body, computed once
  bool conditional = false;  // carries If-Match or If-None-Match
};

S3Call MakeCall(S3Op op, http::verb method, std::string key) {
  S3Call call;
  call.op = op;
  call.method = method;
  call.key = std::move(key);
  return call;
}

// "PUT s3://bucket/key", the prefix of every message about the call.
std::string Describe(const Shared& s, const S3Call& call) {
  std::string out = std::string(MethodName(call.op)) + " s3://" + s.cfg.bucket;
  if (!call.key.empty()) out += "/" + call.key;
  return out;
}

HttpRequest BuildRequest(const Shared& s, const S3Call& call) {
  std::string path = "/" + s.cfg.bucket;
  if (!call.key.empty()) path += "/" + call.key;
  const std::string uri = UriEncodePath(path);
  const std::string query = CanonicalQueryString(call.query);
  const std::string amz_date = AmzDate(s.env.WallNow());

  HttpRequest req;
  req.method = call.method;
  req.target = query.empty() ? uri : uri + "?" + query;
  req.headers = call.headers;
  req.headers.emplace_back("x-amz-content-sha256", call.payload_hash);
  req.headers.emplace_back("x-amz-date", amz_date);
  if (!s.creds.session_token.empty()) {
    req.headers.emplace_back("x-amz-security-token", s.creds.session_token);
  }
  req.body = call.body;
  req.idempotent = !IsWrite(call.op);

  // The client sends exactly this Host value (HttpClient::endpoint().host_header).
  SigV4Request to_sign{http::to_string(call.method), uri, call.query, req.headers,
                       call.payload_hash};
  to_sign.headers.emplace_back("host", s.client->endpoint().host_header);
  SigV4Signature sig = SignV4(to_sign, s.creds, s.cfg.region, "s3", amz_date);
  req.headers.emplace_back("Authorization", std::move(sig.authorization));
  return req;
}

// Replies retried inside the call: each says the request was not applied.
bool RetriedInside(int status, const S3Error& err) {
  return (status == 409 && err.code == "ConditionalRequestConflict") || status == 503 ||
         status == 429;
}

std::string ReplyText(int status, const S3Error& err) {
  std::string out = "HTTP " + std::to_string(status);
  if (!err.code.empty()) out += " " + err.code;
  if (!err.message.empty()) out += ": " + err.message;
  return out;
}

// The Status of a final (not retried) reply. Ok for a 2xx and for replies that mean
// success for this operation.
Status ClassifyReply(S3Op op, bool conditional, int status, const S3Error& err,
                     const std::string& what) {
  if (status >= 200 && status < 300) return Status::Ok();
  const std::string text = what + ": " + ReplyText(status, err);
  const bool write = IsWrite(op);
  // Codes that mean the same whatever the status.
  if (err.code == "NoSuchBucket") return Fatal(text + " (create the bucket or fix its name)");
  if (err.code == "InvalidAccessKeyId" || err.code == "SignatureDoesNotMatch" ||
      err.code == "AuthorizationHeaderMalformed" || err.code == "ExpiredToken" ||
      err.code == "InvalidToken" || err.code == "RequestTimeTooSkewed" ||
      err.code == "XAmzContentSHA256Mismatch" || err.code == "AccessDenied") {
    return Fatal(text);
  }
  switch (status) {
    case 412:
      return PreconditionFailed(text);
    case 404:
      // AWS answers an If-Match on a missing key with 404 NoSuchKey where RGW says 412:
      // both mean the condition did not hold.
      if (write && conditional) return PreconditionFailed(text);
      if (op == S3Op::kDelete) return Status::Ok();  // deleting a missing key
      if (op == S3Op::kGet || op == S3Op::kHead) return NotFound(text);
      return Fatal(text);  // a listing or an unconditional write: the bucket is wrong
    case 409:
      if (op == S3Op::kCreateBucket && err.code == "BucketAlreadyOwnedByYou") return Status::Ok();
      if (err.code == "BucketAlreadyExists") return Fatal(text + " (owned by another account)");
      return Retryable(text);  // a conflict rejects the request: nothing was applied
    case 429:
    case 503:
      return Retryable(text);
    case 400:
      if (err.code == "RequestTimeout") return Retryable(text);  // body too slow; not applied
      return InvalidArgument(text);
    case 401:
    case 403:
    case 405:
    case 411:
    case 501:
      return Fatal(text);
    default:
      break;
  }
  if (status >= 500) {
    // A gateway (500/502/504) may answer after the backend applied a write.
    return write ? UnknownOutcome(text + " (the write may have been applied)") : Retryable(text);
  }
  if (status == 413) return InvalidArgument(text);
  // Redirects (wrong region or endpoint) and anything unexpected need a person.
  return Fatal(text);
}

Status TransportStatus(S3Op op, const HttpOutcome& out, const std::string& what) {
  const bool write = IsWrite(op);
  const std::string text = what + ": " + out.detail;
  switch (out.failure) {
    case HttpFailure::kNone:
      break;
    case HttpFailure::kResolveNotFound:
      // The endpoint names a host that does not exist; retrying will not create it.
      return Fatal(text + " (check the endpoint)");
    case HttpFailure::kTlsVerifyFailed:
      // A certificate that does not verify needs a certificate or CA fix, not a retry.
      return Fatal(text);
    case HttpFailure::kResolveFailed:
    case HttpFailure::kConnectFailed:
    case HttpFailure::kTlsHandshakeFailed:
      return Retryable(text + " (nothing was sent)");
    case HttpFailure::kTimeout:
      if (!out.request_sent) return Retryable(text + " (nothing was sent)");
      return UnknownOutcome(text + (write ? " (the write may have been applied)" : ""));
    case HttpFailure::kConnectionLost:
      return UnknownOutcome(text + (write ? " (the write may have been applied)" : ""));
    case HttpFailure::kResponseTooLarge:
      return write ? UnknownOutcome(text) : Fatal(text);
    case HttpFailure::kCancelled:
      // A cancelled write may have been applied (env/task.h: writes report unknown).
      return write ? UnknownOutcome(text) : Cancelled(text);
    case HttpFailure::kShutdown:
      if (!out.request_sent) return Retryable(text + " (nothing was sent)");
      return UnknownOutcome(text);
  }
  return UnknownOutcome(text);
}

// Equal jitter: half the exponential step for sure (so throttling really backs off),
// the other half random (so clients spread out).
Duration Backoff(Shared& s, int attempt) {
  Duration step = s.cfg.retry_base_delay * (std::int64_t{1} << std::min(attempt - 1, 20));
  step = std::min(step, s.cfg.retry_max_delay);
  const Duration half = step / 2;
  const auto extra = s.env.RandomBelow(static_cast<std::uint64_t>(half.count()) + 1);
  return half + Duration(static_cast<Duration::rep>(extra));
}

// Sends the call, retrying the replies that say "not applied" (RetriedInside) within the
// deadline. Ok: a reply that ClassifyReply accepts.
Task<Result<HttpResponse>> Execute(std::shared_ptr<Shared> s, S3Call call, CallOptions options) {
  const MonoTime deadline = s->env.MonoNow() + options.timeout;
  const std::string what = Describe(*s, call);
  call.payload_hash = Sha256Hex(call.body);
  Status last = Retryable(what + ": no attempt made");
  for (int attempt = 1; attempt <= kS3MaxAttempts; ++attempt) {
    HttpRequest request = BuildRequest(*s, call);
    request.urgent = BucketPurposeIsUrgent(options.purpose);
    HttpOutcome out = co_await s->client->Send(std::move(request), deadline);
    if (!out.ok()) co_return TransportStatus(call.op, out, what);
    const int status = out.response.status;
    const S3Error err = status >= 300 ? ParseS3Error(out.response.body) : S3Error{};
    if (!RetriedInside(status, err)) {
      Status st = ClassifyReply(call.op, call.conditional, status, err, what);
      if (!st.ok()) co_return st;
      co_return std::move(out.response);
    }
    last = Retryable(what + ": " + ReplyText(status, err) + " (after " + std::to_string(attempt) +
                     " attempt" + (attempt == 1 ? "" : "s") + ")");
    if (attempt == kS3MaxAttempts) break;
    const Duration backoff = Backoff(*s, attempt);
    if (s->env.MonoNow() + backoff >= deadline) break;  // no time for another attempt
    if (!co_await s->env.SleepFor(backoff)) {
      co_return IsWrite(call.op) ? UnknownOutcome(what + ": cancelled between retries")
                                 : Cancelled(what + ": cancelled between retries");
    }
  }
  co_return last;
}

Result<std::uint64_t> ParseLength(const std::string& text, const std::string& what) {
  std::uint64_t n = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (text.empty() || ec != std::errc() || ptr != text.data() + text.size()) {
    return Fatal(what + ": bad or missing Content-Length '" + text + "'");
  }
  return n;
}

Task<Result<GetOutput>> DoGet(std::shared_ptr<Shared> s, std::string key, CallOptions options) {
  if (Status v = ValidateKey(key); !v.ok()) co_return v;
  S3Call call = MakeCall(S3Op::kGet, http::verb::get, std::move(key));
  const std::string what = Describe(*s, call);
  Result<HttpResponse> r = co_await Execute(s, std::move(call), options);
  if (!r.ok()) co_return r.status();
  const std::string etag = r->Header("etag");
  // Without ETags there are no versions and no conditional writes: the store is unusable.
  if (etag.empty()) co_return Fatal(what + ": the reply has no ETag");
  co_return GetOutput{std::move(r->body), Version(UnquoteETag(etag))};
}

Task<Result<ObjectMeta>> DoHead(std::shared_ptr<Shared> s, std::string key, CallOptions options) {
  if (Status v = ValidateKey(key); !v.ok()) co_return v;
  S3Call call = MakeCall(S3Op::kHead, http::verb::head, std::move(key));
  const std::string what = Describe(*s, call);
  Result<HttpResponse> r = co_await Execute(s, std::move(call), options);
  if (!r.ok()) co_return r.status();
  const std::string etag = r->Header("etag");
  if (etag.empty()) co_return Fatal(what + ": the reply has no ETag");
  Result<std::uint64_t> size = ParseLength(r->Header("content-length"), what);
  if (!size.ok()) co_return size.status();
  co_return ObjectMeta{Version(UnquoteETag(etag)), *size};
}

// A version token is sent back in If-Match. An ETag's opaque-tag is visible ASCII without
// '"' (RFC 9110 §8.8.3); anything else (an empty token, a CR/LF from a corrupted record)
// is refused, so a token can never break or inject a header.
Status ValidateVersionToken(const Version& v) {
  if (v.empty()) return InvalidArgument("If-Match with an empty version");
  for (char ch : v.token()) {
    auto c = static_cast<unsigned char>(ch);
    if (c < 0x21 || c > 0x7e || c == '"') {
      return InvalidArgument("version token contains a character not allowed in an ETag (byte " +
                             std::to_string(c) + ")");
    }
  }
  return Status::Ok();
}

// The If-Match value for version v.
std::string IfMatchValue(const Shared& s, const Version& v) {
  return s.cfg.if_match_quoted ? "\"" + v.token() + "\"" : v.token();
}

Task<Result<Version>> DoPut(std::shared_ptr<Shared> s, std::string key, std::string body,
                            Precondition condition, CallOptions options) {
  if (Status v = ValidateKey(key); !v.ok()) co_return v;
  S3Call call = MakeCall(S3Op::kPut, http::verb::put, std::move(key));
  call.body = std::move(body);
  call.headers.emplace_back("Content-Type", "application/octet-stream");
  switch (condition.kind()) {
    case Precondition::Kind::kNone:
      break;
    case Precondition::Kind::kIfNoneMatchAny:
      call.headers.emplace_back("If-None-Match", "*");
      call.conditional = true;
      break;
    case Precondition::Kind::kIfMatch:
      if (Status v = ValidateVersionToken(condition.version()); !v.ok()) co_return v;
      call.headers.emplace_back("If-Match", IfMatchValue(*s, condition.version()));
      call.conditional = true;
      break;
  }
  const std::string what = Describe(*s, call);
  Result<HttpResponse> r = co_await Execute(s, std::move(call), options);
  if (!r.ok()) co_return r.status();
  const std::string etag = r->Header("etag");
  if (etag.empty()) {
    // Applied, but we cannot name the version: the caller reads it back (docs/node-lease.md, "Unresolved acquires").
    co_return UnknownOutcome(what + ": applied but the reply has no ETag; read the object back");
  }
  co_return Version(UnquoteETag(etag));
}

Task<Status> DoDelete(std::shared_ptr<Shared> s, std::string key, Precondition condition,
                      CallOptions options) {
  if (Status v = ValidateKey(key); !v.ok()) co_return v;
  S3Call call = MakeCall(S3Op::kDelete, http::verb::delete_, std::move(key));
  switch (condition.kind()) {
    case Precondition::Kind::kNone:
      break;
    case Precondition::Kind::kIfNoneMatchAny:
      co_return InvalidArgument("a delete cannot be conditional on the key not existing");
    case Precondition::Kind::kIfMatch:
      // Servers that ignore If-Match on DELETE would delete unconditionally: refuse
      // rather than pretend.
      if (!s->cfg.conditional_delete) {
        co_return InvalidArgument("this store does not support conditional deletes");
      }
      if (Status v = ValidateVersionToken(condition.version()); !v.ok()) co_return v;
      call.headers.emplace_back("If-Match", IfMatchValue(*s, condition.version()));
      call.conditional = true;
      break;
  }
  Result<HttpResponse> r = co_await Execute(s, std::move(call), options);
  co_return r.ok() ? Status::Ok() : r.status();
}

Task<Result<ListPage>> DoList(std::shared_ptr<Shared> s, ListOptions options, CallOptions call_options) {
  if (Status v = ValidateListOptions(options); !v.ok()) co_return v;
  S3Call call = MakeCall(S3Op::kList, http::verb::get, "");
  call.query.emplace_back("list-type", "2");
  call.query.emplace_back("max-keys", std::to_string(options.page_size));
  if (!options.prefix.empty()) call.query.emplace_back("prefix", options.prefix);
  if (!options.continuation.empty()) {
    call.query.emplace_back("continuation-token", options.continuation);
  } else if (!options.start_after.empty()) {
    call.query.emplace_back("start-after", options.start_after);
  }
  const std::string what = Describe(*s, call);
  Result<HttpResponse> r = co_await Execute(s, std::move(call), call_options);
  if (!r.ok()) co_return r.status();
  Result<S3ListResult> parsed = ParseListObjectsV2(r->body);
  if (!parsed.ok()) co_return Status(parsed.code(), what + ": " + parsed.status().message());
  ListPage page;
  page.entries.reserve(parsed->entries.size());
  for (auto& e : parsed->entries) {
    page.entries.push_back(ListEntry{std::move(e.key), Version(std::move(e.etag)), e.size, e.modified_ms});
  }
  if (parsed->is_truncated) page.next_continuation = std::move(parsed->next_continuation_token);
  co_return page;
}

Task<Status> DoCreateBucket(std::shared_ptr<Shared> s, CallOptions options) {
  S3Call call = MakeCall(S3Op::kCreateBucket, http::verb::put, "");
  // us-east-1 is S3's default location and must not be named; RGW wants no body either
  // unless a non-default placement is asked for.
  if (s->cfg.region != "us-east-1") {
    call.body =
        "<CreateBucketConfiguration xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        "<LocationConstraint>" + s->cfg.region + "</LocationConstraint></CreateBucketConfiguration>";
    call.headers.emplace_back("Content-Type", "application/xml");
  }
  Result<HttpResponse> r = co_await Execute(s, std::move(call), options);
  co_return r.ok() ? Status::Ok() : r.status();
}

// An HTTP date (RFC 9110 §5.6.7, the IMF-fixdate S3 sends: "Tue, 03 Dec 2026 08:49:37 GMT").
Result<WallTime> ParseHttpDate(const std::string& text) {
  std::tm tm{};
  const char* end = ::strptime(text.c_str(), "%a, %d %b %Y %H:%M:%S GMT", &tm);
  if (end == nullptr || *end != '\0') return Fatal("the bucket's Date header '" + text + "' is not an HTTP date");
  const std::time_t secs = ::timegm(&tm);
  return FromUnixMs(static_cast<std::int64_t>(secs) * 1000);
}

Task<Result<BucketClock>> DoBucketTime(std::shared_ptr<Shared> s, CallOptions options) {
  S3Call call = MakeCall(S3Op::kHead, http::verb::head, "");
  const MonoTime sent = s->env.MonoNow();
  Result<HttpResponse> r = co_await Execute(s, std::move(call), options);
  if (!r.ok()) co_return r.status();
  auto date = ParseHttpDate(r->Header("date"));
  if (!date.ok()) co_return date.status();
  // The Date was taken while the request was served: the bucket's time now is at least
  // it, and at most a second (its resolution) plus the whole round trip later.
  const Duration round_trip = s->env.MonoNow() - sent;
  co_return BucketClock{*date, *date + std::chrono::seconds(1) + std::chrono::duration_cast<std::chrono::milliseconds>(round_trip)};
}

}  // namespace

Result<std::unique_ptr<S3Store>> S3Store::Create(RealEnv& env, S3Config cfg,
                                                 HttpClientOptions http_options) {
  if (cfg.bucket.empty()) return InvalidArgument("s3 store: missing bucket");
  if (!cfg.path_style) {
    return InvalidArgument("s3 store: only path-style addressing is implemented");
  }
  if (cfg.access_key.empty() || cfg.secret_key.empty()) {
    return InvalidArgument("s3 store: missing credentials (access key and secret key)");
  }
  if (cfg.region.empty()) return InvalidArgument("s3 store: region is empty");
  if (cfg.retry_base_delay <= Duration::zero() || cfg.retry_max_delay < cfg.retry_base_delay) {
    return InvalidArgument("s3 store: need 0 < retry_base_delay <= retry_max_delay");
  }
  Result<S3Endpoint> ep = ParseS3Endpoint(cfg.endpoint);
  if (!ep.ok()) return ep.status();
  http_options.max_connections = cfg.max_connections;
  http_options.reserved_urgent_connections = ReservedUrgentConnections(cfg.max_connections);
  auto client = HttpClient::Create(env, std::move(ep).value(), std::move(http_options));
  if (!client.ok()) return client.status();
  auto shared = std::make_shared<Shared>(env, std::move(cfg), std::move(client).value());
  return std::unique_ptr<S3Store>(new S3Store(std::move(shared)));
}

S3Store::~S3Store() { shared_->client->Shutdown(); }

// The methods are not coroutines: each returns a Task that holds the shared state, never
// `this`, so it may outlive the S3Store (see the header's lifetime rules).
Task<Result<GetOutput>> S3Store::Get(std::string key, CallOptions options) {
  return DoGet(shared_, std::move(key), options);
}
Task<Result<ObjectMeta>> S3Store::Head(std::string key, CallOptions options) {
  return DoHead(shared_, std::move(key), options);
}
Task<Result<Version>> S3Store::Put(std::string key, std::string body, Precondition condition,
                                   CallOptions options) {
  return DoPut(shared_, std::move(key), std::move(body), std::move(condition), options);
}
Task<Status> S3Store::Delete(std::string key, Precondition condition, CallOptions options) {
  return DoDelete(shared_, std::move(key), std::move(condition), options);
}
Task<Result<ListPage>> S3Store::List(ListOptions options, CallOptions call) {
  return DoList(shared_, std::move(options), call);
}
Task<Status> S3Store::CreateBucket(CallOptions options) { return DoCreateBucket(shared_, options); }

std::string S3Store::Describe() const { return DescribeS3Config(shared_->cfg); }
bool S3Store::SupportsConditionalDelete() const { return shared_->cfg.conditional_delete; }
Task<Result<BucketClock>> S3Store::BucketTime(CallOptions options) { return DoBucketTime(shared_, options); }
HttpClientStats S3Store::http_stats() const { return shared_->client->stats(); }

int ReservedUrgentConnections(int max_connections) {
  if (max_connections < 2) return 0;
  return std::max(1, max_connections / 8);
}

void PublishS3StoreMetrics(MetricsRegistry& r, const S3Store& store) {
  // Read on the scraping loop thread, where the pool lives (base/metrics.h).
  const S3Store* s = &store;
  r.AddCallbackGauge("wasmkeep_bucket_connections", "Connections to the bucket checked out by requests now.",
                     [s] { return static_cast<double>(s->http_stats().in_use); }, {{"state", "in_use"}});
  r.AddCallbackGauge("wasmkeep_bucket_connections", "Connections to the bucket checked out by requests now.",
                     [s] { return static_cast<double>(s->http_stats().idle); }, {{"state", "idle"}});
  for (const bool urgent : {true, false}) {
    const MetricLabels lane{{"lane", urgent ? "urgent" : "bulk"}};
    r.AddCallbackCounter("wasmkeep_bucket_connection_waits_total",
                         "Bucket requests that found no connection their lane could take and waited for one "
                         "(lane urgent: lease, listing, fence, owner; bulk: the rest).",
                         [s, urgent] {
                           const HttpClientStats st = s->http_stats();
                           return static_cast<double>(urgent ? st.urgent_waits : st.other_waits);
                         },
                         lane);
    r.AddCallbackCounter("wasmkeep_bucket_connection_wait_timeouts_total",
                         "Bucket requests whose deadline passed (or that were cancelled) while they waited for a "
                         "connection: never sent.",
                         [s, urgent] {
                           const HttpClientStats st = s->http_stats();
                           return static_cast<double>(urgent ? st.urgent_wait_timeouts : st.other_wait_timeouts);
                         },
                         lane);
  }
}
std::string S3Store::IfMatchRefusedHint() const {
  // FACTS: Ceph RGW fails every quoted If-Match; AWS S3 documents the quoted form.
  if (shared_->cfg.if_match_quoted) {
    return "it was sent quoted (\"etag\"): if this is Ceph RGW, add if_match_quoted=false to the s3:// URL "
           "(or set s3.if_match_quoted = false in the config file)";
  }
  return "it was sent unquoted: add if_match_quoted=true to the s3:// URL (or set s3.if_match_quoted = true "
         "in the config file); AWS S3 and Cloudflare R2 take the quoted form";
}

Result<S3Config> S3ConfigFromEnv(const GetenvFn& getenv) {
  auto endpoint = getenv("WASMKEEP_S3_ENDPOINT");
  auto bucket = getenv("WASMKEEP_S3_BUCKET");
  if (!endpoint || endpoint->empty()) return InvalidArgument("WASMKEEP_S3_ENDPOINT is not set");
  if (!bucket || bucket->empty()) return InvalidArgument("WASMKEEP_S3_BUCKET is not set");
  auto region = getenv("WASMKEEP_S3_REGION");
  auto quoted = getenv("WASMKEEP_S3_IF_MATCH_QUOTED");
  // Through the URL parser, so the same validation and messages apply.
  std::string url = "s3://" + *bucket + "?endpoint=" + UriEncode(*endpoint, false);
  if (region && !region->empty()) url += "&region=" + UriEncode(*region, false);
  // RGW (the test server) fails every quoted If-Match (docs/storage-backends.md, "Ceph RGW quirks").
  url += "&if_match_quoted=" + UriEncode(quoted ? *quoted : "false", false);
  return ParseS3Url(url, getenv);
}

Task<Result<std::unique_ptr<ObjectStore>>> OpenS3StoreFromEnv(RealEnv& env, GetenvFn getenv) {
  Result<S3Config> cfg = S3ConfigFromEnv(getenv);
  if (!cfg.ok()) co_return cfg.status();
  Result<std::unique_ptr<S3Store>> store = S3Store::Create(env, std::move(cfg).value());
  if (!store.ok()) co_return store.status();
  Status created = co_await store.value()->CreateBucket();
  if (!created.ok()) co_return created;
  co_return std::unique_ptr<ObjectStore>(std::move(store).value());
}

}  // namespace wk
