#include "scale.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>

#include "cluster/node_record.h"
#include "cluster/owner_record.h"

namespace wk::sim {
namespace {

// The prefix S3 partitions by, as this model takes it: the key up to its last '/' (a
// LIST's prefix "nodes/" and the key "nodes/n5" are both "nodes").
std::string PrefixOf(const std::string& key) {
  const std::size_t slash = key.rfind('/');
  return slash == std::string::npos ? std::string() : key.substr(0, slash);
}

bool IsWriteOp(StoreOp op) { return op == StoreOp::kPut || op == StoreOp::kDelete; }

bool IsSlowDown(const Status& s) {
  return s.code() == Code::kRetryable && s.message().find(kSlowDownText) != std::string::npos;
}

double Seconds(Duration d) { return std::chrono::duration<double>(d).count(); }

std::string Fixed(double v, int decimals = 1) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

// Whether a refused attempt is tried again, after its backoff (the s3:// client's rule:
// src/store/s3/s3_store.cc, Execute). False: the call answers the refusal. A free
// coroutine on SleepUntil (docs/DEVELOPING.md, GCC 12's coroutine bugs).
Task<bool> Again(BucketModel* model, Env* env, Status last, BucketPurpose purpose, BucketOp op, int attempt,
                 MonoTime deadline) {
  if (!IsSlowDown(last)) co_return false;
  const Duration backoff = model->Backoff(attempt);
  if (attempt >= kS3Attempts || env->MonoNow() + backoff >= deadline) {
    model->Refused(purpose, op);
    co_return false;
  }
  const MonoTime until = env->MonoNow() + backoff;
  const bool slept = co_await env->SleepUntil(until);
  co_return slept;
}

Status StatusOf(const Status& s) { return s; }
template <typename T>
Status StatusOf(const Result<T>& r) {
  return r.status();
}

// One call through the model: every attempt counted, a refusal tried again as the s3://
// client does (Again), each attempt (`once`, given the time left) within the call's deadline.
template <typename R>
Task<R> Attempts(BucketModel* model, Env* env, BucketOp op, CallOptions options,
                 std::function<Task<R>(CallOptions)> once) {
  const MonoTime deadline = env->MonoNow() + options.timeout;
  for (int attempt = 1;; ++attempt) {
    model->Sent(options.purpose, op);
    CallOptions call = options;
    call.timeout = deadline - env->MonoNow();
    R got = co_await once(call);
    const bool again = co_await Again(model, env, StatusOf(got), options.purpose, op, attempt, deadline);
    if (!again) co_return got;
  }
}

}  // namespace

// ---- ScaleStore

Task<Result<GetOutput>> ScaleStore::Get(std::string key, CallOptions options) {
  return Attempts<Result<GetOutput>>(&model_, &env_, BucketOp::kGet, options,
                                     [inner = &inner(), key = std::move(key)](CallOptions call) {
                                       return inner->Get(key, call);
                                     });
}
Task<Result<ObjectMeta>> ScaleStore::Head(std::string key, CallOptions options) {
  return Attempts<Result<ObjectMeta>>(&model_, &env_, BucketOp::kHead, options,
                                      [inner = &inner(), key = std::move(key)](CallOptions call) {
                                        return inner->Head(key, call);
                                      });
}
Task<Result<Version>> ScaleStore::Put(std::string key, std::string body, Precondition condition, CallOptions options) {
  return Attempts<Result<Version>>(
      &model_, &env_, BucketOp::kPut, options,
      [inner = &inner(), key = std::move(key), body = std::move(body), condition = std::move(condition)](
          CallOptions call) { return inner->Put(key, body, condition, call); });
}
Task<Status> ScaleStore::Delete(std::string key, Precondition condition, CallOptions options) {
  return Attempts<Status>(&model_, &env_, BucketOp::kDelete, options,
                          [inner = &inner(), key = std::move(key), condition = std::move(condition)](
                              CallOptions call) { return inner->Delete(key, condition, call); });
}
Task<Result<ListPage>> ScaleStore::List(ListOptions options, CallOptions call) {
  return Attempts<Result<ListPage>>(&model_, &env_, BucketOp::kList, call,
                                    [inner = &inner(), list = std::move(options)](CallOptions attempt) {
                                      return inner->List(list, attempt);
                                    });
}

// ---- the shape of a run

ScaleShape DefaultScaleShape(int nodes, bool owners, int measure_seconds) {
  ScaleShape s;
  s.nodes = nodes;
  s.actors = owners ? 2 * nodes : 0;
  // Ten heartbeat periods: the listing's refreshes (every ten periods) spread evenly.
  s.start_spread = seconds(30);
  s.warm_up = s.start_spread + seconds(30);
  // Shorter at large N: a 1,000-node run's window costs minutes of CPU.
  const int window = measure_seconds > 0 ? measure_seconds : nodes <= 100 ? 90 : nodes <= 300 ? 60 : 40;
  s.measure = seconds(window);
  s.kills = 3;
  s.restart_after = seconds(45);
  s.check_every = nodes <= 10 ? Duration(0) : milliseconds(50);
  return s;
}

// ---- BucketModel

BucketModel::BucketModel(World& world, const ScaleShape& shape)
    : w_(world), shape_(shape), window_from_(MonoTime(shape.warm_up)),
      window_to_(MonoTime(shape.warm_up + shape.measure)) {}

bool BucketModel::Measuring() const { return w_.Now() >= window_from_ && w_.Now() < window_to_; }

// Assumed S3 Standard latencies for small objects in the bucket's own region (docs/scaling.md):
// the time from the request reaching the bucket to its reply reaching the node.
Duration BucketModel::Latency(const OpInfo& op) {
  const bool tail = w_.Chance(0.01);
  switch (op.op) {
    case StoreOp::kGet:
    case StoreOp::kHead:
      return milliseconds(tail ? w_.Uniform(50, 200) : w_.Uniform(8, 25));
    case StoreOp::kPut:
    case StoreOp::kDelete:
      return milliseconds(tail ? w_.Uniform(80, 300) : w_.Uniform(15, 45));
    case StoreOp::kList: {
      // Slower with the page: about 30 us a key returned.
      int keys = 0;
      const auto& objects = w_.bucket()->objects();
      for (auto it = objects.lower_bound(op.key); it != objects.end() && keys < kMaxListPageSize; ++it, ++keys) {
        if (it->first.compare(0, op.key.size(), op.key) != 0) break;
      }
      const std::int64_t base = w_.Uniform(20, 50) + keys * 3 / 100 + (tail ? w_.Uniform(100, 300) : 0);
      return milliseconds(base);
    }
  }
  return milliseconds(20);
}

OpFault BucketModel::Fault(int slot, const OpInfo& op) {
  (void)slot;
  OpFault f;
  f.request_delay = milliseconds(w_.Uniform(1, 3));
  const MonoTime arrival = w_.Now() + f.request_delay;
  const std::string prefix = PrefixOf(op.key);
  PrefixStats& ps = prefixes_[prefix];
  const std::int64_t second = World::Ms(arrival.time_since_epoch()) / 1000;
  auto& [reads, writes] = ps.seconds[second];
  while (ps.seconds.size() > 4) ps.seconds.erase(ps.seconds.begin());
  const bool write = IsWriteOp(op.op);
  int& admitted = write ? writes : reads;
  const int limit = write ? kS3WritesPerPrefix : kS3ReadsPerPrefix;
  const bool measuring = Measuring();
  if (admitted >= limit) {
    // Refused before it is applied; not counted against the rate (the bucket did no work).
    ++ps.refused;
    if (measuring) ++ps.refused_in_window;
    if (!first_refusal_) {
      first_refusal_ = w_.Now();
      first_refusal_what_ = "503 SlowDown on " + prefix + "/ (" + (write ? "writes over " : "reads over ") +
                            std::to_string(limit) + "/s)";
    }
    f.fail_before_apply = Retryable(std::string(kSlowDownText) + " (simulated: prefix " + prefix + "/)");
    f.reply_delay = milliseconds(w_.Uniform(2, 8));
    return f;
  }
  ++admitted;
  if (measuring) {
    if (write) {
      ++ps.writes_in_window;
      ps.peak_writes = std::max(ps.peak_writes, admitted);
    } else {
      ++ps.reads_in_window;
      ps.peak_reads = std::max(ps.peak_reads, admitted);
    }
  }
  f.reply_delay = Latency(op);
  return f;
}

void BucketModel::Sent(BucketPurpose purpose, BucketOp op) {
  const auto p = static_cast<std::size_t>(purpose);
  const auto o = static_cast<std::size_t>(op);
  ++sent_[p][o];
  if (Measuring()) ++sent_in_window_[p][o];
}

void BucketModel::Refused(BucketPurpose purpose, BucketOp op) {
  const auto p = static_cast<std::size_t>(purpose);
  const auto o = static_cast<std::size_t>(op);
  ++refused_[p][o];
  if (Measuring()) ++refused_in_window_[p][o];
}

// Equal jitter, as the s3:// client: half the step for sure, the other half drawn.
Duration BucketModel::Backoff(int attempt) {
  const std::int64_t step = std::min<std::int64_t>(50LL << std::min(attempt - 1, 20), 2000);
  return milliseconds(step / 2 + w_.Uniform(0, step / 2));
}

void BucketModel::OnKill(Process& p) {
  Kill k;
  k.at = w_.Now();
  k.node = p.node_id;
  k.instance = p.instance;
  const auto& objects = w_.bucket()->objects();
  for (auto it = objects.lower_bound(std::string(kOwnersPrefix));
       it != objects.end() && it->first.starts_with(kOwnersPrefix); ++it) {
    auto rec = DecodeOwnerRecord(it->second.body);
    if (rec.ok() && rec->Names(p.node_id, p.instance)) k.held.push_back(it->first);
  }
  kill_of_[p.instance] = kills_.size();
  kills_.push_back(std::move(k));
}

void BucketModel::OnLanded(const std::string& key, const std::string& body) {
  if (key.starts_with(kOwnersPrefix)) {
    if (kills_.empty()) return;
    auto rec = DecodeOwnerRecord(body);
    if (!rec.ok() || rec->names_nobody()) return;
    for (Kill& k : kills_) {
      if (rec->instance == k.instance || k.taken.count(key)) continue;
      if (std::find(k.held.begin(), k.held.end(), key) != k.held.end()) k.taken[key] = w_.Now();
    }
    return;
  }
  if (!key.starts_with(kNodesPrefix)) return;
  auto obj = DecodeNodeObject(body);
  if (!obj.ok() || !std::holds_alternative<NodeRecord>(*obj)) return;
  const auto& r = std::get<NodeRecord>(*obj);
  if (r.state != LeaseState::kFenced) return;
  ++fences_landed_;
  auto k = kill_of_.find(r.instance);
  if (k == kill_of_.end()) {
    ++fences_of_others_;  // a process nobody killed: it missed its renewals
    return;
  }
  ++fences_of_killed_;
  Kill& kill = kills_[k->second];
  if (!kill.fenced) kill.fenced = w_.Now();
}

void BucketModel::Sample(Duration since_last) {
  const bool measuring = Measuring();
  for (auto& [n, p] : w_.processes()) {
    if (!p->running || !p->node) continue;
    listing_max_ = std::max(listing_max_, p->node->membership().stats().last_duration);
    if (!measuring) continue;
    node_seconds_ += Seconds(since_last);
    if (p->node->lease().IsValid()) valid_node_seconds_ += Seconds(since_last);
  }
  const std::uint64_t lapses = w_.result().lapses;
  if (measuring) lapses_in_window_ += lapses - lapses_seen_;
  lapses_seen_ = lapses;
}

std::uint64_t BucketModel::Sum(const Counts& c, std::optional<BucketPurpose> purpose, std::optional<BucketOp> op) {
  std::uint64_t n = 0;
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    if (purpose && static_cast<std::size_t>(*purpose) != p) continue;
    for (std::size_t o = 0; o < kBucketOps; ++o) {
      if (op && static_cast<std::size_t>(*op) != o) continue;
      n += c[p][o];
    }
  }
  return n;
}

double BucketModel::DollarsPerRequest(BucketOp op) {
  switch (op) {
    case BucketOp::kPut:
    case BucketOp::kList: return kS3PutCopyPostListPer1000 / 1000;
    case BucketOp::kGet:
    case BucketOp::kHead: return kS3GetAndOtherPer1000 / 1000;
    case BucketOp::kDelete:
    case BucketOp::kCount: return 0;
  }
  return 0;
}

void BucketModel::Report(const Checkers& checkers, RunResult& result) const {
  const double window = Seconds(shape_.measure);
  const double node_s = node_seconds_ > 0 ? node_seconds_ : 1;
  std::string out;
  auto line = [&out](const std::string& s) { out += s + "\n"; };
  line("scale report: " + std::to_string(shape_.nodes) + " nodes" +
       (shape_.actors > 0 ? ", " + std::to_string(shape_.actors) + " actors (ownership)" : " (lease)") + ", seed " +
       std::to_string(w_.options().seed) + "; virtual time: nodes started over " +
       Fixed(Seconds(shape_.start_spread), 0) + " s, window " + Fixed(Seconds(shape_.warm_up), 0) + "-" +
       Fixed(Seconds(shape_.warm_up + shape_.measure), 0) + " s with " + std::to_string(kills_.size()) +
       " kills, then " + Fixed(Seconds(w_.heal_for), 0) + " s without kills");
  line("  window: " + Fixed(node_seconds_, 0) + " node-seconds (" + Fixed(valid_node_seconds_, 0) + " with a valid lease)");

  // Requests by purpose and operation, in the window.
  double dollars_per_s = 0;
  line("  requests in the window, by purpose: per second of the cluster | per node-second | by operation (/s) | $/day");
  const std::uint64_t total = Sum(sent_in_window_, std::nullopt, std::nullopt);
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    const auto purpose = static_cast<BucketPurpose>(p);
    const std::uint64_t n = Sum(sent_in_window_, purpose, std::nullopt);
    if (n == 0) continue;
    std::string ops;
    double dollars = 0;
    for (std::size_t o = 0; o < kBucketOps; ++o) {
      const std::uint64_t c = sent_in_window_[p][o];
      if (c == 0) continue;
      dollars += static_cast<double>(c) * DollarsPerRequest(static_cast<BucketOp>(o));
      ops += (ops.empty() ? "" : ", ") + std::string(BucketOpName(static_cast<BucketOp>(o))) + " " +
             Fixed(static_cast<double>(c) / window);
    }
    dollars_per_s += dollars / window;
    line("    " + std::string(BucketPurposeName(purpose)) + ": " + Fixed(static_cast<double>(n) / window) + " | " +
         Fixed(static_cast<double>(n) / node_s, 3) + " | " + ops + " | $" + Fixed(dollars / window * 86400, 2));
  }
  line("    all: " + Fixed(static_cast<double>(total) / window) + " | " + Fixed(static_cast<double>(total) / node_s, 3) +
       " | $" + Fixed(dollars_per_s * 86400, 2) + " a day at S3 Standard's request prices ($" +
       Fixed(dollars_per_s * 86400 / std::max(1, shape_.nodes), 3) + " a node)");

  // The prefixes: their busiest second and their refusals.
  line("  prefixes (window: mean and busiest second of admitted requests; 503s in the window / the run):");
  std::uint64_t refused_window = 0, refused_run = 0;
  for (const auto& [prefix, ps] : prefixes_) {
    refused_window += ps.refused_in_window;
    refused_run += ps.refused;
    if (ps.reads_in_window + ps.writes_in_window + ps.refused == 0) continue;
    line("    " + prefix + "/: reads " + Fixed(static_cast<double>(ps.reads_in_window) / window) + "/s (peak " +
         std::to_string(ps.peak_reads) + " of " + std::to_string(kS3ReadsPerPrefix) + "), writes " +
         Fixed(static_cast<double>(ps.writes_in_window) / window) + "/s (peak " + std::to_string(ps.peak_writes) +
         " of " + std::to_string(kS3WritesPerPrefix) + "), 503s " + std::to_string(ps.refused_in_window) + " / " +
         std::to_string(ps.refused));
  }
  std::string refused_calls;
  for (std::size_t p = 0; p < kBucketPurposes; ++p) {
    const std::uint64_t n = Sum(refused_, static_cast<BucketPurpose>(p), std::nullopt);
    if (n > 0) {
      refused_calls += (refused_calls.empty() ? "" : ", ") + std::string(BucketPurposeName(static_cast<BucketPurpose>(p))) +
                       " " + std::to_string(n);
    }
  }
  line("  calls that failed with 503 after the client's retries (the run), by purpose: " +
       (refused_calls.empty() ? std::string("none") : refused_calls));

  // Failover after each kill.
  double fence_sum = 0, taken_sum = 0;
  int fenced = 0, taken_all = 0;
  line("  failover (from the kill):");
  for (const Kill& k : kills_) {
    std::string s = "    " + k.node.str() + " killed at " + Fixed(Seconds(k.at.time_since_epoch())) + " s: ";
    if (k.fenced) {
      const double d = Seconds(*k.fenced - k.at);
      fence_sum += d;
      ++fenced;
      s += "fenced after " + Fixed(d) + " s";
    } else {
      s += "never fenced";
    }
    if (shape_.actors > 0) {
      s += "; " + std::to_string(k.held.size()) + " actors held, " + std::to_string(k.taken.size()) + " taken by others";
      if (!k.taken.empty()) {
        MonoTime last{};
        for (const auto& [key, at] : k.taken) last = std::max(last, at);
        s += ", the last after " + Fixed(Seconds(last - k.at)) + " s";
        if (k.taken.size() == k.held.size()) {
          taken_sum += Seconds(last - k.at);
          ++taken_all;
        }
      }
    }
    line(s);
  }
  const std::uint64_t fence_requests = Sum(sent_in_window_, BucketPurpose::kFence, std::nullopt);
  line("  fences: " + std::to_string(fences_landed_) + " landed, " + std::to_string(fences_of_killed_) +
       " of killed processes, " + std::to_string(fences_of_others_) + " of processes nobody killed; " +
       Fixed(static_cast<double>(fence_requests) / std::max<std::size_t>(1, kills_.size()), 0) +
       " fence requests in the window per kill (every node watches)");

  // The listing and the leases.
  const double mean_listing = result.listings > 0 ? result.listing_seconds / static_cast<double>(result.listings) : 0;
  line("  listing: " + std::to_string(result.listings) + " listings, " + std::to_string(result.listing_failures) +
       " failed, " + std::to_string(result.listing_reads) + " bodies read, " +
       std::to_string((shape_.nodes + kMaxListPageSize - 1) / kMaxListPageSize) + " page(s) a listing; " +
       Fixed(mean_listing, 2) + " s a listing on average, the longest " + Fixed(Seconds(listing_max_), 2) + " s");
  line("  leases: " + std::to_string(lapses_in_window_) + " lapses in the window (renewals missed past validity), " +
       std::to_string(result.lapses) + " in the run, " + std::to_string(result.lost_leases) + " leases lost");
  const std::uint64_t owner_reads = Sum(sent_in_window_, BucketPurpose::kOwner, BucketOp::kGet);
  if (shape_.actors > 0) {
    line("  owners: " + Fixed(static_cast<double>(owner_reads) / window) + " owner reads/s in the window; " +
         std::to_string(result.acquisitions) + " acquisitions landed, " + std::to_string(result.holds) + " holds");
  }
  const std::uint64_t liveness = checkers.liveness_failures();
  if (liveness == 0) {
    line("  liveness after healing: every node valid and every view converged (checkers 7, 7b)");
  } else {
    line("  liveness after healing: " + std::to_string(liveness) + " failures of checkers 7, 7b, e.g. " +
         checkers.liveness_samples().front());
  }
  // What broke first, and the rest that broke.
  std::string first = first_refusal_ ? first_refusal_what_ + " at " + Fixed(Seconds(first_refusal_->time_since_epoch())) +
                                           " s" + (*first_refusal_ < window_from_ ? " (while starting)" : "")
                                     : std::string("none");
  if (!first_refusal_ && result.listing_failures > 0) first = "listings failed";
  if (!first_refusal_ && fences_of_others_ > 0) first = "live nodes fenced";
  line("  first limit hit: " + first);
  result.scale_report = out;

  char row[2048];
  std::snprintf(row, sizeof row,
                "scale-row nodes=%d actors=%d seed=%llu req_s=%.1f lease_s=%.1f listing_s=%.1f fence_s=%.1f "
                "owner_s=%.1f other_s=%.1f per_node_s=%.3f dollars_day=%.2f fence_after_s=%s taken_after_s=%s "
                "listing_s_mean=%.2f listing_fail=%llu lapses=%llu live_fenced=%llu refused_503=%llu/%llu liveness=%s "
                "first_limit=%s",
                shape_.nodes, shape_.actors, static_cast<unsigned long long>(w_.options().seed),
                static_cast<double>(total) / window,
                static_cast<double>(Sum(sent_in_window_, BucketPurpose::kLease, std::nullopt)) / window,
                static_cast<double>(Sum(sent_in_window_, BucketPurpose::kListing, std::nullopt)) / window,
                static_cast<double>(fence_requests) / window,
                static_cast<double>(Sum(sent_in_window_, BucketPurpose::kOwner, std::nullopt)) / window,
                static_cast<double>(total - Sum(sent_in_window_, BucketPurpose::kLease, std::nullopt) -
                                    Sum(sent_in_window_, BucketPurpose::kListing, std::nullopt) - fence_requests -
                                    Sum(sent_in_window_, BucketPurpose::kOwner, std::nullopt)) /
                    window,
                static_cast<double>(total) / node_s, dollars_per_s * 86400,
                fenced > 0 ? Fixed(fence_sum / fenced).c_str() : "never",
                shape_.actors == 0 ? "-" : taken_all > 0 ? Fixed(taken_sum / taken_all).c_str() : "never", mean_listing,
                static_cast<unsigned long long>(result.listing_failures),
                static_cast<unsigned long long>(lapses_in_window_), static_cast<unsigned long long>(fences_of_others_),
                static_cast<unsigned long long>(refused_window), static_cast<unsigned long long>(refused_run),
                liveness == 0 ? "ok" : std::to_string(liveness).c_str(), first.c_str());
  std::string row_text = row;
  std::replace(row_text.begin() + static_cast<std::ptrdiff_t>(row_text.find("first_limit=")), row_text.end(), ' ', '_');
  result.scale_row = row_text;
}

// ---- the run

RunResult RunScaled(const RunOptions& options, bool owners, std::function<void(World& world, Process& p)> workload) {
  const ScaleShape shape = DefaultScaleShape(options.nodes > 0 ? options.nodes : kSlots, owners, options.scale_seconds);
  WorldOptions wo;
  wo.actors = shape.actors;
  wo.slots = shape.nodes;
  wo.start_spread = shape.start_spread;
  wo.chaos_for = shape.warm_up + shape.measure;
  World world(options, wo);
  Faults faults(world, FaultOptions{});  // its Heal only: restarts every slot that is down
  CheckerOptions co;
  co.owners = owners;
  co.owners_from_holds = true;
  co.liveness_report = true;
  co.liveness_violations = options.require_liveness;
  Checkers checkers(world, co);
  BucketModel model(world, shape);
  World::Stages stages = Connect(world, faults, checkers);
  World* w = &world;
  BucketModel* m = &model;
  world.hooks.fault = [m](int slot, const OpInfo& op) { return m->Fault(slot, op); };
  auto landed = world.hooks.on_landed;
  world.hooks.on_landed = [landed, m](const std::string& key, const std::string& body) {
    landed(key, body);
    m->OnLanded(key, body);
  };
  world.hooks.node_store = [m](Process& p, ObjectStore& recording) -> ObjectStore& {
    auto scale = std::make_unique<ScaleStore>(recording, *m, *p.env());
    auto counting = std::make_unique<CountingStore>(*scale);
    ObjectStore& outermost = *counting;
    p.store_layers.push_back(std::move(scale));
    p.store_layers.push_back(std::move(counting));
    return outermost;
  };
  if (workload) world.hooks.on_started = [w, workload](Process& p) { workload(*w, p); };
  // The kills, evenly spaced in the window; each killed node restarts after restart_after.
  stages.begin = [w, m, shape] {
    for (int i = 0; i < shape.kills; ++i) {
      const MonoTime at = MonoTime(shape.warm_up + seconds(5) + shape.measure * i / shape.kills);
      w->bucket_env().StartTimer(at, [w, m, shape] {
        for (int attempt = 0; attempt < 20; ++attempt) {
          const int slot = static_cast<int>(w->Uniform(0, w->slots() - 1));
          Process* p = w->Primary(slot);
          if (p == nullptr || !p->node->lease().IsValid()) continue;
          ++w->result().kills;
          w->Trace("kill p" + std::to_string(p->number) + " (" + p->node_id.str() + ")");
          m->OnKill(*p);
          w->Reap(p->number);
          w->ScheduleRestart(slot, shape.restart_after);
          return;
        }
      });
    }
  };
  // The safety checkers after every event, or every check_every in large worlds.
  auto next_check = std::make_shared<MonoTime>();
  auto last_sample = std::make_shared<MonoTime>();
  Checkers* c = &checkers;
  stages.every_step = [w, m, c, shape, next_check, last_sample] {
    if (w->Now() < *next_check) return;
    *next_check = w->Now() + shape.check_every;
    c->CheckEveryStep();
    m->Sample(w->Now() - *last_sample);
    *last_sample = w->Now();
  };
  RunResult result = world.Run(stages);
  model.Report(checkers, result);
  return result;
}

}  // namespace wk::sim
