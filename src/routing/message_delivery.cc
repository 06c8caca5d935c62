#include "routing/message_delivery.h"

#include <algorithm>
#include <limits>
#include <set>
#include <utility>
#include <vector>

#include "base/log.h"

namespace wk {
namespace {

// How one delivery ended, as its answer says.
enum class Outcome : std::uint8_t { kApplied, kDuplicate, kFailed, kUnavailable, kPermanent };

Outcome Classify(const ServerResponse& r) {
  if (r.status == 200) return r.body.starts_with("duplicate") ? Outcome::kDuplicate : Outcome::kApplied;
  if (r.status == 500) return Outcome::kFailed;
  // No class, no wk_on_message, a body over the receiver's max_request_bytes: no retry helps.
  if (r.status == 404 || r.status == 413) return Outcome::kPermanent;
  return Outcome::kUnavailable;
}

std::string Why(const ServerResponse& r) {
  std::string why = std::to_string(r.status) + ": " + r.body;
  while (!why.empty() && why.back() == '\n') why.pop_back();
  constexpr std::size_t kMaxErrorBytes = 512;  // kept in the state with the message
  if (why.size() > kMaxErrorBytes) why.resize(kMaxErrorBytes);
  return why;
}

void Append(actor::Batch& to, actor::Batch from) {
  for (auto& m : from.system) to.system.push_back(std::move(m));
}

}  // namespace

ServerResponse MessageAnswer(const actor::EventResult& result, std::string_view receiver) {
  ServerResponse r;
  r.headers.emplace_back("Content-Type", "text/plain; charset=utf-8");
  switch (result.outcome) {
    case actor::EventOutcome::kOk:
      r.status = 200;
      r.body = result.message_duplicate ? "duplicate\n" : "applied\n";
      return r;
    case actor::EventOutcome::kNotFound: r.status = 404; break;
    case actor::EventOutcome::kBadRequest: r.status = 413; break;
    case actor::EventOutcome::kActorFailed: r.status = 500; break;
    default: r.status = 503; break;
  }
  r.body = std::string(receiver) + ": " + result.error + "\n";
  if (r.status == 503) r.headers.emplace_back("Retry-After", "1");
  return r;
}

Status ValidateMessageDeliveryOptions(const MessageDeliveryOptions& o) {
  if (o.first_retry < std::chrono::milliseconds(10) || o.first_retry > std::chrono::minutes(10)) {
    return InvalidArgument("messages.first_retry_ms must be between 10 ms and 10 minutes");
  }
  if (o.max_retry < o.first_retry || o.max_retry > std::chrono::hours(1)) {
    return InvalidArgument("messages.max_retry_ms must be at least messages.first_retry_ms and at most an hour");
  }
  if (o.max_attempts < 1 || o.max_attempts > 1000) return InvalidArgument("messages.max_attempts must be 1..1000");
  if (o.round_entries < 1 || o.round_entries > 10'000) {
    return InvalidArgument("messages.round_entries must be 1..10000");
  }
  return Status::Ok();
}

MessageDelivery::MessageDelivery(Env& env, actor::EventHost& host, DeliverFn deliver, MessageDeliveryOptions options,
                                 BrokenModels broken)
    : env_(env), host_(host), deliver_(std::move(deliver)), options_(options), broken_(broken) {}

MessageDelivery::~MessageDelivery() { Stop(); }

void MessageDelivery::Stop() {
  *alive_ = false;
  for (auto& [id, s] : senders_) {
    if (s.task.valid()) s.task.Cancel();
  }
  senders_.clear();
}

std::int64_t MessageDelivery::WallMs() const { return ToUnixMs(env_.WallNow()); }

Duration MessageDelivery::Backoff(int failures) const {
  Duration d = options_.first_retry;
  for (int i = 1; i < failures && d < options_.max_retry; ++i) d *= 2;
  return std::min(d, options_.max_retry);
}

void MessageDelivery::Kick(const ActorId& sender) {
  if (!*alive_) return;
  auto [it, fresh] = senders_.try_emplace(sender);
  Sender& s = it->second;
  if (!fresh) {
    s.again = true;
    if (s.wake) s.wake->Set(true);  // sleeping until a back-off ends: a new message may be due now
    return;
  }
  s.task = env_.Spawn(Drive(alive_, this, sender), "messages " + sender.ToString());
}

Task<void> MessageDelivery::Drive(std::shared_ptr<bool> alive, MessageDelivery* self, ActorId sender) {
  for (;;) {
    self->senders_[sender].again = false;
    Result<std::optional<std::int64_t>> next = co_await self->Round(sender);
    if (!*alive) co_return;
    Sender& s = self->senders_[sender];
    if (!next.ok()) {
      // The actor left this node (or its storage failed): its next holder delivers.
      WK_LOG_DEBUG("message delivery stopped", {{"sender", sender.ToString()}, {"why", next.status().ToString()}});
      if (s.again && next.code() != Code::kNotFound && next.code() != Code::kCancelled) continue;
      break;
    }
    if (!next->has_value()) {
      if (s.again) continue;
      break;
    }
    if (s.again) continue;
    // Nothing due now: sleep until the earliest retry, or a kick.
    const std::int64_t wait_ms = std::max<std::int64_t>(1, **next - self->WallMs());
    Latch<bool> wake(self->env_, [] { return false; });
    s.wake = wake;
    const Env::TimerId timer =
        self->env_.StartTimer(self->env_.MonoNow() + std::chrono::milliseconds(wait_ms), [wake] { wake.Set(true); });
    const bool woke = co_await wake.Wait();
    if (!*alive) co_return;
    self->env_.CancelTimer(timer);
    self->senders_[sender].wake.reset();
    if (!woke) break;  // cancelled
  }
  self->senders_.erase(sender);
}

Task<ServerResponse> MessageDelivery::DeliverOne(std::shared_ptr<RoundState> round, const Entry& e) {
  actor::IncomingMessage m;
  m.from = round->sender;
  m.seq = e.first;
  m.body = e.second.body;
  m.retry_count = static_cast<std::int32_t>(e.second.attempts);
  ActorId to = e.second.to;
  if (round->self->admit_) {
    while (const std::optional<Duration> wait = round->self->admit_(round->sender.tenant)) {
      co_await round->self->env_.SleepFor(*wait);
      if (!*round->alive) co_return ServerResponse{503, {}, "message delivery stopped"};
    }
  }
  ServerResponse r = co_await round->self->deliver_(std::move(to), std::move(m));
  co_return r;
}

Task<void> MessageDelivery::RunLane(std::shared_ptr<RoundState> round, std::size_t i, bool out_of_order) {
  Lane& lane = round->lanes[i];
  auto& answers = round->answers[i];
  if (out_of_order) {
    // The broken model: every message of the lane at once, as if order did not matter.
    struct Inner {
      explicit Inner(Env& env) : all(env, [] { return false; }) {}
      std::size_t left = 0;
      Latch<bool> all;
    };
    auto inner = std::make_shared<Inner>(round->self->env_);
    inner->left = lane.messages.size();
    answers.resize(lane.messages.size());
    for (std::size_t k = 0; k < lane.messages.size(); ++k) {
      round->self->env_.Spawn(
          [](std::shared_ptr<RoundState> round, std::size_t i, std::size_t k, std::shared_ptr<Inner> inner) -> Task<void> {
            ServerResponse r = co_await DeliverOne(round, round->lanes[i].messages[k]);
            if (!*round->alive) co_return;
            round->self->ObserveLatency(round->lanes[i].messages[k].second, r);
            round->answers[i][k] = {round->lanes[i].entries[k], std::move(r)};
            if (--inner->left == 0) inner->all.Set(true);
          }(round, i, k, inner),
          "message");
    }
    co_await inner->all.Wait();
  } else {
    for (std::size_t k = 0; k < lane.messages.size(); ++k) {
      ServerResponse r = co_await DeliverOne(round, lane.messages[k]);
      if (!*round->alive) co_return;
      round->self->ObserveLatency(lane.messages[k].second, r);
      const Outcome o = Classify(r);
      answers.emplace_back(lane.entries[k], std::move(r));
      if (o != Outcome::kApplied && o != Outcome::kDuplicate && o != Outcome::kPermanent) break;
    }
  }
  if (--round->left == 0) round->all.Set(true);
}

void MessageDelivery::ObserveLatency(const actor::OutboxMessage& m, const ServerResponse& r) {
  // At each answer, not once per round: a busy round's first messages were answered long
  // before its last (bench/messages_bench.sh: the metric read 149 ms against 102 measured).
  const Outcome o = Classify(r);
  if (o != Outcome::kApplied && o != Outcome::kDuplicate) return;
  stats_.latency_seconds.Observe(static_cast<double>(std::max<std::int64_t>(0, WallMs() - m.sent_ms)) / 1000.0);
}

Task<Result<std::optional<std::int64_t>>> MessageDelivery::Round(ActorId sender) {
  ++stats_.rounds;
  // Through the actor's gates: only what is durable, only while this node holds it.
  auto outbox = co_await host_.ReadOutbox(sender, options_.round_entries);
  if (!outbox.ok()) co_return outbox.status();
  if (outbox->empty()) co_return std::optional<std::int64_t>();
  const std::int64_t now = WallMs();
  Sender& state = senders_[sender];
  // Per receiver, its messages in order (the outbox lists lowest numbers first).
  std::map<ActorId, std::vector<Entry*>> by_receiver;
  std::optional<std::int64_t> next_due;
  auto later = [&next_due](std::int64_t t) { next_due = next_due ? std::min(*next_due, t) : t; };
  for (Entry& e : *outbox) by_receiver[e.second.to].push_back(&e);
  std::vector<Lane> lanes;
  for (auto& [to, entries] : by_receiver) {
    std::int64_t not_before = entries.front()->second.next_try_ms;
    if (auto u = state.unavailable.find(to); u != state.unavailable.end()) {
      not_before = std::max(not_before, u->second.first);
    }
    if (not_before > now) {
      later(not_before);
      continue;
    }
    lanes.push_back(Lane{to, entries, {}});
  }
  if (lanes.empty()) co_return next_due;
  for (Lane& lane : lanes) {
    for (Entry* e : lane.entries) lane.messages.push_back(*e);
  }

  // Each receiver's messages one after another (the next only once the previous one took
  // effect, so its applied record stays one number per sender); receivers at once. The
  // lanes' tasks share the round's state, which outlives a cancelled round.
  auto round = std::make_shared<RoundState>(env_);
  round->self = this;
  round->alive = alive_;
  round->sender = sender;
  round->lanes = std::move(lanes);
  round->answers.resize(round->lanes.size());
  round->left = round->lanes.size();
  const bool out_of_order = broken_.on(BrokenModel::kMessagesOutOfOrder);
  std::vector<TaskHandle> tasks;
  for (std::size_t i = 0; i < round->lanes.size(); ++i) {
    tasks.push_back(env_.Spawn(RunLane(round, i, out_of_order), "message lane"));
  }
  const bool finished = co_await round->all.Wait();
  if (!*round->alive) co_return Cancelled("stopped");
  if (!finished) {
    for (auto& t : tasks) t.Cancel();
    co_return Cancelled("cancelled");
  }
  const auto& lanes_done = round->lanes;
  const auto& results = round->answers;

  const std::int64_t answered = WallMs();
  actor::Batch settle;
  Sender& s = senders_[sender];
  for (std::size_t i = 0; i < lanes_done.size(); ++i) {
    for (auto& [e, r] : results[i]) {
      const std::uint64_t seq = e->first;
      actor::OutboxMessage& m = e->second;
      switch (Classify(r)) {
        case Outcome::kApplied:
        case Outcome::kDuplicate:
          ++(Classify(r) == Outcome::kApplied ? stats_.delivered : stats_.duplicates);
          s.unavailable.erase(m.to);
          Append(settle, actor::OutboxDelivered(seq));
          break;
        case Outcome::kFailed:
          ++stats_.failed;
          s.unavailable.erase(m.to);
          m.attempts += 1;
          m.last_error = Why(r);
          if (static_cast<int>(m.attempts) >= options_.max_attempts) {
            ++stats_.parked;
            WK_LOG_WARN("a message is parked as dead: its handler failed max_attempts times",
                        {{"sender", sender.ToString()}, {"receiver", m.to.ToString()}, {"seq", std::to_string(seq)},
                         {"error", m.last_error}});
            Append(settle, actor::OutboxParked(seq, m));
          } else {
            m.next_try_ms = answered + Backoff(static_cast<int>(m.attempts)) / std::chrono::milliseconds(1);
            later(m.next_try_ms);
            Append(settle, actor::OutboxFailed(seq, m));
          }
          break;
        case Outcome::kPermanent:
          ++stats_.parked;
          m.last_error = Why(r);
          WK_LOG_WARN("a message is parked as dead: its receiver cannot take it",
                      {{"sender", sender.ToString()}, {"receiver", m.to.ToString()}, {"seq", std::to_string(seq)},
                       {"error", m.last_error}});
          Append(settle, actor::OutboxParked(seq, m));
          break;
        case Outcome::kUnavailable: {
          ++stats_.unavailable;
          auto& [not_before, failures] = s.unavailable[m.to];
          failures += 1;
          not_before = answered + Backoff(failures) / std::chrono::milliseconds(1);
          later(not_before);
          break;
        }
      }
    }
  }
  if (!settle.empty()) {
    ActorId who = sender;
    Status recorded = co_await host_.CommitSystem(std::move(who), std::move(settle));
    if (!recorded.ok()) {
      ++stats_.settle_failures;
      co_return recorded;
    }
  }
  // More may be due at once (a lane's next message after a delivered one, entries past this
  // round's read): read again.
  co_return std::optional<std::int64_t>(now);
}

void PublishMessageMetrics(MetricsRegistry& registry, const MessageDelivery& delivery) {
  const MessageDeliveryStats& stats = delivery.stats();
  const std::string help = "Message deliveries by outcome (docs/messages.md).";
  for (const auto& [outcome, field] :
       {std::pair{"delivered", &stats.delivered}, std::pair{"duplicate", &stats.duplicates},
        std::pair{"failed", &stats.failed}, std::pair{"unavailable", &stats.unavailable},
        std::pair{"parked", &stats.parked}}) {
    registry.AddCallbackCounter("wasmkeep_messages_total", help, [field] { return static_cast<double>(*field); },
                                {{"outcome", outcome}});
  }
  registry.AddCallbackGauge("wasmkeep_message_senders", "Actors whose outboxes this node is delivering now",
                            [&delivery] { return static_cast<double>(delivery.senders()); });
  registry.AddHistogramView("wasmkeep_message_latency_seconds",
                            "From a message's sending event to its receiver's durable answer",
                            stats.latency_seconds);
}

}  // namespace wk
