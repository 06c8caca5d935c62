// bank: one account per actor, transfers as messages between actors; the AssemblyScript
// twin of examples/bank/bank.cc, with the same HTTP behaviour, messages and storage layout
// (examples/bank/README.md describes them).
//
//   POST /deposit?amount=N              adds N (1 .. 10^15); answers the new balance
//   GET  /balance                       the balance; a new account has 0
//   POST /transfer?to=<name>&amount=N   debits N and sends "credit:N" to bank/<name> in one
//                                       batch, answering the message's sequence number;
//                                       409 at once if the balance is short
//   GET  /history                       "out ..." lines, then "in ..." lines
//
// wk_on_message applies a credit (or a refund) exactly once: the balance, the log line and
// the host's record that the message was applied commit in one batch.
import {
  Message, Request, Response, ListOptions, handleMessage, handleRequest, log, parseInt64, send, storage,
} from "wasmkeep";

const BALANCE = "balance";
const OUT = "out/";
const IN = "in/";
const CREDIT = "credit:";
const REFUND = "refund:";
const MAX_AMOUNT: i64 = 1_000_000_000_000_000;
const MAX_BALANCE: i64 = 4 * MAX_AMOUNT;
const LOG_PER_PEER: i32 = 20;

function padded(v: i64): string {
  return v.toString().padStart(20, "0");
}

// A positive amount up to MAX_AMOUNT, or -1.
function parseAmount(text: string | null): i64 {
  if (text === null) return -1;
  const v = parseInt64(text);
  if (v === null || v.value <= 0 || v.value > MAX_AMOUNT) return -1;
  return v.value;
}

// 1 to 64 letters, digits, '-', '_', '.'.
function validName(name: string): bool {
  if (name.length == 0 || name.length > 64) return false;
  for (let i = 0; i < name.length; i++) {
    const c = name.charCodeAt(i);
    const ok = (c >= 0x61 && c <= 0x7a) || (c >= 0x41 && c <= 0x5a) || (c >= 0x30 && c <= 0x39) || c == 0x2d ||
               c == 0x5f || c == 0x2e;
    if (!ok) return false;
  }
  return true;
}

function balance(): i64 {
  return storage.getInt(BALANCE);
}

// Appends to the log under prefix and drops its oldest entries past LOG_PER_PEER.
function logLine(prefix: string, seq: i64, line: string): void {
  storage.put(prefix + padded(seq), line);
  const options = new ListOptions();
  options.prefix = prefix;
  options.limit = LOG_PER_PEER + 1;
  options.reverse = true;
  const entries = storage.list(options);
  for (let i = LOG_PER_PEER; i < entries.length; i++) storage.delete(entries[i].key);
}

function deposit(req: Request, res: Response): void {
  const amount = parseAmount(req.queryParam("amount"));
  if (amount < 0) {
    res.text(400, "amount must be a whole number from 1 to 10^15\n");
    return;
  }
  const b = balance();
  if (b > MAX_BALANCE - amount) {
    res.text(409, "the balance would pass its bound\n");
    return;
  }
  storage.putInt(BALANCE, b + amount);
  res.text(200, (b + amount).toString() + "\n");
}

function transfer(req: Request, res: Response): void {
  const to = req.queryParam("to");
  if (to === null || !validName(to)) {
    res.text(400, "to must be an account name (letters, digits, - _ .)\n");
    return;
  }
  const amount = parseAmount(req.queryParam("amount"));
  if (amount < 0) {
    res.text(400, "amount must be a whole number from 1 to 10^15\n");
    return;
  }
  const b = balance();
  if (b < amount) {
    res.text(409, "insufficient funds: the balance is " + b.toString() + "\n");
    return;
  }
  // The debit and the message commit in one batch: both, or (if the event fails) neither.
  storage.putInt(BALANCE, b - amount);
  const target = "bank/" + to;
  const seq = send(target, CREDIT + amount.toString());
  logLine(OUT, seq, "out " + target + " seq=" + seq.toString() + " amount=" + amount.toString());
  res.text(200, seq.toString() + "\n");
}

function history(res: Response): void {
  let out = "";
  for (let pass = 0; pass < 2; pass++) {
    const options = new ListOptions();
    options.prefix = pass == 0 ? OUT : IN;
    const entries = storage.list(options);
    for (let i = 0; i < entries.length; i++) out += entries[i].value + "\n";
  }
  res.text(200, out);
}

function handle(req: Request, res: Response): void {
  const path = req.path;
  const isGet = path == "/balance" || path == "/history";
  const isPost = path == "/deposit" || path == "/transfer";
  if (!isGet && !isPost) {
    res.text(404, "use GET /balance, GET /history, POST /deposit, POST /transfer\n");
    return;
  }
  if (req.method != (isGet ? "GET" : "POST")) {
    res.header("Allow", isGet ? "GET" : "POST");
    res.text(405, "method not allowed\n");
    return;
  }
  if (path == "/balance") {
    res.text(200, balance().toString() + "\n");
  } else if (path == "/history") {
    history(res);
  } else if (path == "/deposit") {
    deposit(req, res);
  } else {
    transfer(req, res);
  }
}

// True if name is "<tenant>/bank/<account>".
function fromAnAccount(name: string): bool {
  const slash = name.indexOf("/");
  return slash >= 0 && name.substring(slash + 1).startsWith("bank/");
}

function onMessage(msg: Message): void {
  const sender = msg.sender;
  const prefix = IN + sender + "/";
  const head = "in " + sender + " seq=" + msg.seq.toString();
  const body = msg.body;
  const refund = body.startsWith(REFUND);
  let amount: i64 = -1;
  if (refund) {
    amount = parseAmount(body.substring(REFUND.length));
  } else if (body.startsWith(CREDIT)) {
    amount = parseAmount(body.substring(CREDIT.length));
  }
  if (amount < 0 || !fromAnAccount(sender)) {
    log.warn("bank: a message that is neither a credit nor a refund, from " + sender);
    logLine(prefix, msg.seq, head + " bad");
    return;
  }
  const b = balance();
  if (!refund && b > MAX_BALANCE - amount) {
    // Answered with a message back, which the sender always takes (see bank.cc).
    const back = send(sender, REFUND + amount.toString());
    logLine(prefix, msg.seq, head + " amount=" + amount.toString() + " refused refund_seq=" + back.toString());
    return;
  }
  storage.putInt(BALANCE, b + amount);
  logLine(prefix, msg.seq,
          head + (refund ? " refund=" : " amount=") + amount.toString() + " retry=" + msg.retryCount.toString());
}

export function wk_on_request(): i32 {
  return handleRequest(handle);
}

export function wk_on_message(): i32 {
  return handleMessage(onMessage);
}
