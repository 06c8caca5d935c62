// EventHost: what the actor API's front (routing/front.h) needs of whatever runs actors'
// events on a node: whether an actor is resident, one request event, and asking an actor
// to leave memory. ActorRuntime (runtime.h: WebAssembly on worker threads) is the real
// one; the simulator runs native test actors behind the same interface
// (sim/native_actor_host.h), so the front runs unchanged there.
//
// The contract the front relies on: HandleRequest answers kOk only with a response that
// may be released (its writes durable, and the storage's output gate passed); anything
// else is one of the other outcomes (types.h). It never throws.
//
// Threading: the Env loop thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "actor/alarm_event.h"
#include "actor/messages.h"
#include "actor/sockets.h"
#include "actor/storage.h"
#include "actor/types.h"
#include "base/ids.h"
#include "env/task.h"

namespace wk::actor {

using ::wk::ActorId;

// What an operator does with a dead message (docs/messages.md, "Dead messages"): send it
// again (RetryDead) or drop it (DropDead).
enum class DeadAction : std::uint8_t { kRetry, kDrop };

class EventHost {
 public:
  virtual ~EventHost() = default;
  // Runs a request event for the actor (starting it if needed) and answers once its
  // response may be released.
  virtual Task<EventResult> HandleRequest(ActorId id, Request request) = 0;
  // Runs an alarm event for the actor (starting it if needed), by the rules of
  // alarm_event.h, and answers once its answer may be released (the fields alarm_fired and
  // alarm_after, types.h). A host without alarms answers kNotFound.
  virtual Task<EventResult> HandleAlarm(ActorId id, AlarmEvent event) {
    (void)id;
    (void)event;
    EventResult r;
    r.outcome = EventOutcome::kNotFound;
    r.error = "this host runs no alarms";
    co_return r;
  }
  // Messages between actors (docs/messages.md). Runs a message event for the receiver `id`
  // (starting it if needed): nothing runs if its applied record covers (message.from,
  // message.seq) (kOk with message_duplicate); otherwise its wk_on_message, whose success
  // commits the applied record in the handler's own batch. kNotFound: no such class, or a
  // class without wk_on_message. Answers once releasable, as HandleRequest.
  virtual Task<EventResult> HandleMessage(ActorId id, IncomingMessage message) {
    (void)id;
    (void)message;
    EventResult r;
    r.outcome = EventOutcome::kNotFound;
    r.error = "this host runs no messages";
    co_return r;
  }
  // WebSockets (docs/websockets.md): runs the actor's wk_on_socket_open, _message or _close
  // for one of its connections (starting it if needed), and answers once releasable, as
  // HandleRequest. An open is accepted when the answer is kOk with a status below 400; a
  // message's or close's failure discards its writes and sends. What the event sent,
  // closed and tagged goes to the runtime's SocketDirectory, not back to the caller.
  // kNotFound: no such class, or a class without wk_on_socket_message (it takes no
  // WebSockets). A host without WebSockets answers kNotFound.
  virtual Task<EventResult> HandleSocket(ActorId id, SocketEvent event) {
    (void)id;
    (void)event;
    EventResult r;
    r.outcome = EventOutcome::kNotFound;
    r.error = "this host runs no WebSockets";
    co_return r;
  }
  // The sender's outbox (lowest numbers first, at most `max`), read between its events, as
  // of everything it committed, and answered only once all of that is durable under a hold
  // that is still valid (the output gate: a message is never sent before its batch is
  // durable, nor by a node that no longer holds its sender). kNotFound: not resident here;
  // kRetryable: its storage failed or the gate refused.
  virtual Task<Result<std::vector<std::pair<std::uint64_t, OutboxMessage>>>> ReadOutbox(ActorId id, std::size_t max) {
    (void)id;
    (void)max;
    co_return NotFound("this host runs no messages");
  }
  // Commits a batch of the runtime's own (OutboxDelivered, OutboxFailed, OutboxParked:
  // actor/messages.h) for a resident actor, between its events; OK once durable.
  // kNotFound: not resident here; kRetryable: not durable (the storage failed).
  virtual Task<Status> CommitSystem(ActorId id, Batch batch) {
    (void)id;
    (void)batch;
    co_return NotFound("this host runs no messages");
  }
  // An operator's retry or drop of the dead message `seq` of the actor `id`, starting the
  // actor if it is not resident (as a request would: its class's current code; the caller
  // routed it here, so this node holds it or may acquire it). The batch is built at the
  // actor's input gate, between its events, from its state as of everything committed
  // before (RetryDead or DropDead: actor/messages.h), committed there, and answered only once
  // it is durable under a valid hold (the output gate). After a retry the actor's outbox is
  // reported as for a durable event that sent messages, so its delivery resumes. Returns
  // the retried message's new number, or `seq` for a drop. kNotFound: no such dead message
  // (the message names the number), or no class deployed; kRetryable: the actor cannot run
  // here now (nothing was committed); kUnknownOutcome: committed, but the output gate
  // refused it (it may yet be durable: list the messages again); kFatal: its entry is
  // damaged, or the host runs no messages.
  virtual Task<Result<std::uint64_t>> ResolveDead(ActorId id, std::uint64_t seq, DeadAction action) {
    (void)id;
    (void)seq;
    (void)action;
    co_return Fatal("this host runs no messages");
  }
  // Asks an actor to leave memory as soon as it is idle. No effect if it is not resident.
  virtual void Unload(const ActorId& id) = 0;
  // Starts an actor now, without an event (its storage opens: the hold, the restore), so
  // that the target of a move restores it at once (docs/architecture.md, "Drain and
  // move"). No effect if it is resident or its class is not loaded; a start that fails
  // leaves nothing behind. A host that only starts actors for events (test hosts) ignores
  // it: the actor then starts at its first event, as it would without a move.
  virtual void Warm(const ActorId& id) { (void)id; }
  virtual bool IsResident(const ActorId& id) const = 0;
};

}  // namespace wk::actor
