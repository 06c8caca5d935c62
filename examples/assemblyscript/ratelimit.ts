// ratelimit: a token bucket per actor; the AssemblyScript twin of
// examples/ratelimit/ratelimit.cc, with the same HTTP behaviour and storage layout.
//
//   POST /take     takes one token: 200 with the whole tokens left ("9\n"), or 429 with
//                  Retry-After (whole seconds until a token is back) when the bucket is empty
//   GET  /         the whole tokens available now, without taking one
//   POST /config?capacity=C&refill_per_sec=R
//                  this actor's own capacity and refill rate (whole numbers, 1..1,000,000)
//
// The bucket starts full and refills continuously from now(). State, in storage:
//   "milli_tokens"  tokens in thousandths, so a refill of 1 token/s is 1 per ms, exact in
//                   integers ("10000" is a full bucket of 10)
//   "refilled_ms"   the now() up to which "milli_tokens" is refilled
//   "capacity", "refill_per_sec"   set by /config; absent: the constants below
// A 429 writes nothing: the refill it computed follows from the stored state and the clock.
import { Request, Response, storage, handleRequest, now, parseInt64 } from "wasmkeep";

const DEFAULT_CAPACITY_TOKENS: i64 = 10;
const DEFAULT_REFILL_TOKENS_PER_SEC: i64 = 1;
// Bounds of /config; they keep every product below (milli-tokens, elapsed * rate) far from
// i64 overflow.
const MAX_CAPACITY_TOKENS: i64 = 1_000_000;
const MAX_REFILL_TOKENS_PER_SEC: i64 = 1_000_000;
const MILLI: i64 = 1000;  // milli-tokens per token

const MILLI_TOKENS_KEY = "milli_tokens";
const REFILLED_KEY = "refilled_ms";
const CAPACITY_KEY = "capacity";
const REFILL_KEY = "refill_per_sec";

class Bucket {
  capacityTokens: i64 = 0;
  refillTokensPerSec: i64 = 0;
  milliTokens: i64 = 0;  // after refilling up to refilledMs
  refilledMs: i64 = 0;
}

// Reads the bucket and refills it up to nowMs. A clock that went backwards refills nothing
// (and never takes tokens away).
function loadAndRefill(nowMs: i64): Bucket {
  const b = new Bucket();
  b.capacityTokens = storage.getInt(CAPACITY_KEY, DEFAULT_CAPACITY_TOKENS);
  b.refillTokensPerSec = storage.getInt(REFILL_KEY, DEFAULT_REFILL_TOKENS_PER_SEC);
  const full = b.capacityTokens * MILLI;
  b.milliTokens = storage.getInt(MILLI_TOKENS_KEY, full);
  b.refilledMs = storage.getInt(REFILLED_KEY, nowMs);
  if (nowMs > b.refilledMs) {
    // R tokens per second is R milli-tokens per millisecond.
    const elapsedMs = nowMs - b.refilledMs;
    const msToFull = full / b.refillTokensPerSec + 1;
    b.milliTokens = elapsedMs >= msToFull ? full : b.milliTokens + elapsedMs * b.refillTokensPerSec;
    b.refilledMs = nowMs;
  }
  if (b.milliTokens > full) b.milliTokens = full;  // a /config may have lowered the capacity
  return b;
}

function store(b: Bucket): void {
  storage.putInt(MILLI_TOKENS_KEY, b.milliTokens);
  storage.putInt(REFILLED_KEY, b.refilledMs);
}

function take(res: Response): void {
  const b = loadAndRefill(now());
  if (b.milliTokens >= MILLI) {
    b.milliTokens -= MILLI;
    store(b);
    res.text(200, (b.milliTokens / MILLI).toString() + "\n");
    return;
  }
  // Time until one whole token is back, rounded up to whole seconds (at least 1).
  const waitMs = (MILLI - b.milliTokens + b.refillTokensPerSec - 1) / b.refillTokensPerSec;
  const waitSeconds: i64 = waitMs <= 0 ? 1 : (waitMs + 999) / 1000;
  res.header("Retry-After", waitSeconds.toString());
  res.text(429, "rate limited: retry in " + waitSeconds.toString() + " s\n");
}

// Query parameter name as a whole number in [1, max]; -1 (after answering 400) otherwise.
function boundedParam(req: Request, res: Response, name: string, max: i64): i64 {
  const text = req.queryParam(name);
  if (text !== null) {
    const value = parseInt64(text);
    if (value !== null && value.value >= 1 && value.value <= max) return value.value;
  }
  res.text(400, name + " must be a whole number from 1 to " + max.toString() + "\n");
  return -1;
}

function configure(req: Request, res: Response): void {
  const nowMs = now();
  const capacity = boundedParam(req, res, "capacity", MAX_CAPACITY_TOKENS);
  if (capacity < 0) return;
  const refill = boundedParam(req, res, "refill_per_sec", MAX_REFILL_TOKENS_PER_SEC);
  if (refill < 0) return;
  // Refill at the old rate up to now, then switch: the new rate counts from now on.
  const b = loadAndRefill(nowMs);
  b.capacityTokens = capacity;
  b.refillTokensPerSec = refill;
  if (b.milliTokens > capacity * MILLI) b.milliTokens = capacity * MILLI;
  storage.putInt(CAPACITY_KEY, capacity);
  storage.putInt(REFILL_KEY, refill);
  store(b);
  res.text(200, "capacity " + capacity.toString() + ", refill " + refill.toString() + "/s\n");
}

function handle(req: Request, res: Response): void {
  const method = req.method;
  const path = req.path;
  if (method == "POST" && path == "/take") return take(res);
  if (method == "POST" && path == "/config") return configure(req, res);
  if (method == "GET" && (path == "/" || path.length == 0)) {
    const b = loadAndRefill(now());
    res.text(200, (b.milliTokens / MILLI).toString() + "\n");
    return;
  }
  if (path == "/take" || path == "/config") {
    res.header("Allow", "POST");
    res.text(405, "method not allowed\n");
    return;
  }
  res.text(404, "use POST /take, GET /, POST /config?capacity=C&refill_per_sec=R\n");
}

export function wk_on_request(): i32 {
  return handleRequest(handle);
}
