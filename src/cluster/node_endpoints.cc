#include "cluster/node_endpoints.h"

#include "base/line_format.h"
#include "base/log.h"

namespace wk {
namespace {

constexpr std::size_t kMaxUrlBytes = 256;
constexpr std::size_t kMaxInstanceBytes = 64;

bool IsToken(std::string_view s, std::size_t max) {
  if (s.empty() || s.size() > max) return false;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (u <= 0x20 || u >= 0x7F) return false;  // printable ASCII without spaces
  }
  return true;
}

}  // namespace

Status ValidateNodeEndpoints(const NodeEndpoints& e) {
  if (Status s = ValidateNodeId(e.node_id); !s.ok()) return s;
  if (!IsToken(e.instance.str(), kMaxInstanceBytes)) {
    return InvalidArgument("instance must be 1 to 64 printable characters without spaces");
  }
  if (!IsToken(e.metrics_url, kMaxUrlBytes) ||
      !(e.metrics_url.starts_with("http://") || e.metrics_url.starts_with("https://"))) {
    return InvalidArgument("metrics must be an http:// or https:// URL of at most 256 printable characters");
  }
  return Status::Ok();
}

std::string EncodeNodeEndpoints(const NodeEndpoints& e) {
  Status s = ValidateNodeEndpoints(e);
  WK_CHECK(s.ok(), "encoding invalid node endpoints: " + s.ToString());
  line_format::LineWriter w("endpoints", 1);
  w.Field("node", e.node_id.str());
  w.Field("instance", e.instance.str());
  w.Field("metrics", e.metrics_url);
  return std::move(w).Take();
}

Result<NodeEndpoints> DecodeNodeEndpoints(std::string_view body) {
  auto reader = line_format::LineReader::Open(body, "endpoints", 1, "wasmkeep-endpoints 1 object");
  if (!reader.ok()) return reader.status();
  NodeEndpoints e;
  auto node = reader->Field("node");
  if (!node.ok()) return node.status();
  e.node_id = NodeId(*node);
  auto instance = reader->Field("instance");
  if (!instance.ok()) return instance.status();
  e.instance = InstanceToken(std::string(*instance));
  auto metrics = reader->Field("metrics");
  if (!metrics.ok()) return metrics.status();
  e.metrics_url = std::string(*metrics);
  if (Status s = reader->Finish(); !s.ok()) return s;
  if (Status s = ValidateNodeEndpoints(e); !s.ok()) return reader->CorruptBody(s.message());
  return e;
}

Task<Status> PublishNodeEndpoints(Env& env, ObjectStore& bucket, NodeEndpoints e, int attempts, Duration retry) {
  ObjectStore& store = bucket.ForPurpose(BucketPurpose::kControl);
  const std::string key = EndpointsKey(e.node_id);
  const std::string body = EncodeNodeEndpoints(e);
  Status last = Retryable("no attempt made");
  for (int attempt = 1; attempt <= attempts; ++attempt) {
    if (attempt > 1 && !co_await env.SleepFor(retry)) co_return Cancelled("stopping");
    auto put = co_await store.Put(key, body, Precondition::None(), CallOptions{retry});
    if (put.ok()) co_return Status::Ok();
    last = put.status();
    if (put.code() == Code::kFatal || put.code() == Code::kInvalidArgument) break;
  }
  WK_LOG_WARN("could not write this node's endpoints (cluster cost will not find its metrics)",
              {{"key", key}, {"error", last.ToString()}});
  co_return last;
}

}  // namespace wk
