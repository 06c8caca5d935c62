// actor.ts: time, randomness, logging, durability and the alarm (docs/abi.md), and the
// functions that run a handler as the module's exports.

import { Request } from "./request";
import { Response } from "./response";
import { fail, utf8 } from "./bytes";
import {
  LOG_DEBUG, LOG_ERROR, LOG_INFO, LOG_WARN, RANDOM_FILL_MAX_BYTES, alarm_delete, alarm_get, alarm_retry_count,
  alarm_set, log as host_log,
  now_ms, random_fill, sync as host_sync,
} from "./host";

// Wall-clock time in milliseconds since the Unix epoch, frozen for the event: the time the
// event was dispatched. (Date.now() would import env.Date.now, which the node refuses.)
export function now(): i64 {
  return now_ms();
}

// n cryptographically strong random bytes (filled RANDOM_FILL_MAX_BYTES at a time, the
// host's limit per call).
export function randomBytes(n: i32): Uint8Array {
  const out = new Uint8Array(n);
  for (let done = 0; done < n; ) {
    const chunk = n - done < RANDOM_FILL_MAX_BYTES ? n - done : RANDOM_FILL_MAX_BYTES;
    random_fill(out.dataStart + <usize>done, <u32>chunk);
    done += chunk;
  }
  return out;
}

// A uniformly distributed random u64, from the host's strong source. (Math.random would
// import env.seed, which the node refuses.)
export function randomU64(): u64 {
  const b = randomBytes(8);
  return load<u64>(b.dataStart);
}

// A random float in [0, 1), from 53 random bits.
export function random(): f64 {
  return <f64>(randomU64() >> 11) / 9007199254740992.0;
}

// n random bytes as 2n lowercase hex digits (ids, tokens).
export function randomHex(n: i32): string {
  const bytes = randomBytes(n);
  const digits = "0123456789abcdef";
  const parts: string[] = [];
  for (let i = 0; i < n; i++) {
    parts.push(digits.charAt(bytes[i] >> 4));
    parts.push(digits.charAt(bytes[i] & 15));
  }
  return parts.join("");
}

function logAt(level: i32, msg: string): void {
  const b = utf8(msg);
  host_log(level, b.dataStart, <u32>b.length);
}

// One line each in the node's log, attributed to the actor. A message is cut at 4 KiB, and
// one event may log 64 KiB in all; beyond that the node drops the event's output and logs
// one warning. (console.log would import env.console.log, which the node refuses.)
export class Log {
  debug(msg: string): void {
    logAt(LOG_DEBUG, msg);
  }
  info(msg: string): void {
    logAt(LOG_INFO, msg);
  }
  warn(msg: string): void {
    logAt(LOG_WARN, msg);
  }
  error(msg: string): void {
    logAt(LOG_ERROR, msg);
  }
}
// @lazy: made on first use, inside an event, after the runtime is set up. An object made
// at the top level of a library file may be allocated before the collector's lists exist.
// @ts-ignore: decorator
@lazy export const log = new Log();

// Commits the event's writes so far as their own batch and waits until it (and every batch
// before it) is durable. True when durable. False if durability failed, the node no longer
// holds the actor or actors.sync_timeout_ms passed: the handler goes on, but its response
// will not be released (the caller gets "unavailable") and later syncs return false at
// once. Writes committed by a sync stay even if the event fails later.
export function sync(): bool {
  return host_sync() == 0;
}

// The actor's one alarm: a wall-clock time in ms since the Unix epoch, stored with its state
// in the same batch as the event's writes. When it comes due the node runs the module's
// wk_on_alarm export (handleAlarm), at least once (docs/alarms.md): the alarm is cleared as
// the handler starts (set it again to re-arm), and a handler that throws has its writes
// discarded and is retried with back-off.
export class Alarm {
  // Sets or replaces the alarm (timeMs >= 0, else the event fails).
  set(timeMs: i64): void {
    alarm_set(timeMs);
  }
  // The alarm's time, or -1 if none is set.
  get(): i64 {
    return alarm_get();
  }
  // True if an alarm is set.
  get isSet(): bool {
    return alarm_get() >= 0;
  }
  // Removes the alarm.
  delete(): void {
    alarm_delete();
  }
}
// @ts-ignore: decorator (@lazy: see log)
@lazy export const alarm = new Alarm();

// What an alarm handler is told about its alarm: whether this run is a retry after a failed
// one, and how many failed before it (the host's alarm_retry_count, read when asked, so a
// module that never asks does not import it).
export class AlarmInfo {
  // 0 on the alarm's first run, n on its n-th retry.
  get retryCount(): i32 {
    return alarm_retry_count();
  }
  // True when an earlier run of this alarm failed.
  get isRetry(): bool {
    return alarm_retry_count() > 0;
  }
}

// Runs a request handler as the body of the wk_on_request export:
//
//   export function wk_on_request(): i32 { return handleRequest(handle); }
//
// The handler builds the response; returning sends it once the event's writes are durable.
// To fail the event instead (its writes discarded, the caller an error) the handler
// throws: AssemblyScript's throw is an abort, which the SDK logs and turns into a trap.
// After the handler, the garbage of the event is collected (docs/sdk.md, "How it differs from C++": memory).
export function handleRequest(handler: (req: Request, res: Response) => void): i32 {
  handler(new Request(), new Response());
  __collect();
  return 0;
}

// Runs an alarm handler as the body of the wk_on_alarm export:
//
//   export function wk_on_alarm(): i32 { return handleAlarm(onAlarm); }
export function handleAlarm(handler: (info: AlarmInfo) => void): i32 {
  handler(new AlarmInfo());
  __collect();
  return 0;
}

// Runs a state migration as the body of the wk_on_upgrade export (docs/sdk.md, "Class
// versions"): once for an actor whose state an older version committed, before its first
// event on this one, in a batch of its own; a throw (a trap) discards its writes and the
// actor stays on fromVersion. Storage calls only.
//
//   export function wk_on_upgrade(fromVersion: i32): i32 { return handleUpgrade(fromVersion, upgrade); }
export function handleUpgrade(fromVersion: i32, handler: (fromVersion: i32) => void): i32 {
  handler(fromVersion);
  __collect();
  return 0;
}

// The module's abort: build-actor.sh passes --use abort=wasmkeep/assembly/actor/abortEvent,
// so a failed assertion, an out-of-range index or a `throw` logs its message at error
// level, with the source position, and then traps, which fails the event. (AssemblyScript's
// default abort would import env.abort, which the node refuses.)
export function abortEvent(message: string | null = null, fileName: string | null = null, line: u32 = 0,
                           column: u32 = 0): void {
  let text = message !== null ? message : "abort";
  if (fileName !== null) text += " at " + fileName + ":" + line.toString() + ":" + column.toString();
  fail(text);
}

