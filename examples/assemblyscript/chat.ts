// chat: a chat room per actor; the AssemblyScript twin of examples/chat/chat.cc, with the
// same HTTP behaviour and the same storage layout (a room written by one reads in the other).
//
//   POST /messages           appends the body as the next message; answers its number ("3\n")
//   GET  /messages?since=N   the messages numbered above N (default 0), oldest first, one per
//                            line as "<number>\t<text>\n"; at most MAX_MESSAGES_PER_RESPONSE
//                            of them, so a client polls again with since=<last number it got>
//   WebSocket /ws[?since=N]  a live room, as chat.cc's (examples/chat/README.md, "WebSocket
//                            room"): the history, then every new message as it is stored,
//                            "<number>\t<text>" per WebSocket message (binary when the text is
//                            not UTF-8); a client's text message is posted as POST posts it,
//                            or refused to its sender alone as "error\t<reason>"
//
// Storage: "last" holds the newest message's number (decimal text); message N lives under
// "msg/" + N zero-padded to 20 digits, so key order is message order and a range listing
// from "msg/<N+1>" reads the messages after N. An append reads "last", writes the message
// and "last" in one event: one atomic batch, so numbers never repeat or skip.
//
// Messages are handled as bytes (Request.bodyBytes, storage.putBytes): the limit counts
// bytes as the C++ twin does, and a message that is not UTF-8 comes back byte for byte. The
// WebSocket members are the connections tagged "member": nothing about them is kept in
// globals or storage (the node holds the connections and their tags, across hibernation).
import {
  Entry, Request, Response, Socket, SocketMessage, storage, sockets, handleRequest, handleSocketOpen,
  handleSocketMessage, isUtf8, parseInt64, ListOptions, prefixEnd, utf8,
} from "wasmkeep";

const LAST_KEY = "last";
const MESSAGE_PREFIX = "msg/";
// One message is one line of the answer, at most "<20 digits>\t<text>\n": both bounds
// together keep a full page (200 * 4022 bytes) inside the node's default max_response_bytes
// (1 MiB).
const MAX_MESSAGE_BYTES = 4000;
const MAX_MESSAGES_PER_RESPONSE = 200;
// The WebSocket room, as chat.cc's: every open connection carries MEMBER_TAG and a new
// message is broadcast to the tag. Opened without ?since= a connection gets the newest
// HISTORY messages; with ?since=N those after N, at most MAX_CATCH_UP, and when more follow
// it is closed with CLOSE_MORE_HISTORY after them, so the client reconnects with
// since=<the last it got>. 100 messages of at most 4021 bytes stay well inside a
// connection's send queue (websockets.max_send_queue_bytes, 1 MiB by default).
const MEMBER_TAG = "member";
const HISTORY: i32 = 50;
const MAX_CATCH_UP: i32 = 100;
const CLOSE_MORE_HISTORY: i32 = 4000;

// "msg/00000000000000000042" for 42 (20 digits hold every i64).
function messageKey(n: i64): string {
  return MESSAGE_PREFIX + n.toString().padStart(20, "0");
}

// 42 for the key "msg/00000000000000000042".
function keyNumber(key: Uint8Array): i64 {
  const digits = key.subarray(MESSAGE_PREFIX.length);
  let n: i64 = 0;
  for (let j = 0; j < digits.length; j++) n = n * 10 + <i64>(digits[j] - 0x30);
  return n;
}

// "42\thello" as bytes: a message as one line, without the "\n"; the number is ASCII, the
// text the bytes as stored.
function line(n: i64, text: Uint8Array): Uint8Array {
  const number = n.toString();
  const out = new Uint8Array(number.length + 1 + text.length);
  for (let j = 0; j < number.length; j++) out[j] = <u8>number.charCodeAt(j);
  out[number.length] = 0x09;  // tab
  out.set(text, number.length + 1);
  return out;
}

// Why a message is refused, with the HTTP status POST answers. Both ways in refuse the same
// messages with the same reason.
class Refusal {
  constructor(readonly status: i32, readonly reason: string) {}
}

// The refusal of text, or null if it is fine.
function check(text: Uint8Array): Refusal | null {
  if (text.length == 0) return new Refusal(400, "empty message");
  if (text.length > MAX_MESSAGE_BYTES) return new Refusal(413, "message over 4000 bytes");
  if (text.includes(0x0d) || text.includes(0x0a)) return new Refusal(400, "a message is one line (no CR or LF)");
  return null;
}

// Stores text as the next message and sends it to every member; returns its number. The
// sends leave once the event's writes are durable. A message that is not UTF-8 (only POST
// can store one) goes as a binary message holding the same line, since a client closes a
// connection whose text is not UTF-8.
function store(text: Uint8Array): i64 {
  const n = storage.getInt(LAST_KEY) + 1;
  storage.putBytes(messageKey(n), text);
  storage.putInt(LAST_KEY, n);
  const l = line(n, text);
  if (isUtf8(text)) {
    sockets.broadcastUtf8(MEMBER_TAG, l);
  } else {
    sockets.broadcastBinary(MEMBER_TAG, l);
  }
  return n;
}

// The since query parameter: -1 when absent, -2 when it is not a whole number >= 0.
function parseSince(req: Request): i64 {
  const sinceText = req.queryParam("since");
  if (sinceText === null) return -1;
  const parsed = parseInt64(sinceText);
  if (parsed === null || parsed.value < 0) return -2;
  return parsed.value;
}

// Up to limit messages after since, oldest first (nothing after i64.MAX_VALUE).
function messagesAfter(since: i64, limit: i32): Entry[] {
  if (since == i64.MAX_VALUE) return [];
  const options = new ListOptions();
  options.startBytes = utf8(messageKey(since + 1));
  options.endBytes = prefixEnd(utf8(MESSAGE_PREFIX));
  options.limit = limit;
  return storage.list(options);
}

function append(req: Request, res: Response): void {
  const text = req.bodyBytes;
  const refusal = check(text);
  if (refusal !== null) {
    res.text(refusal.status, refusal.reason + "\n");
    return;
  }
  res.text(200, store(text).toString() + "\n");
}

function read(req: Request, res: Response): void {
  let since = parseSince(req);
  if (since == -2) {
    res.text(400, "since must be a number >= 0\n");
    return;
  }
  if (since < 0) since = 0;
  res.status(200).header("Content-Type", "text/plain; charset=utf-8");
  const entries = messagesAfter(since, MAX_MESSAGES_PER_RESPONSE);
  // The answer is assembled in one buffer and written with one host call.
  const lines = new Array<Uint8Array>(entries.length);
  let size = 0;
  for (let i = 0; i < entries.length; i++) {
    lines[i] = line(keyNumber(entries[i].keyBytes), entries[i].valueBytes);
    size += lines[i].length + 1;
  }
  const answer = new Uint8Array(size);
  let pos = 0;
  for (let i = 0; i < lines.length; i++) {
    answer.set(lines[i], pos);
    pos += lines[i].length;
    answer[pos++] = 0x0a;  // newline
  }
  res.writeBytes(answer);
}

function handle(req: Request, res: Response): void {
  if (req.path != "/messages") {
    res.text(404, "use /messages\n");
    return;
  }
  const method = req.method;
  if (method == "POST") return append(req, res);
  if (method == "GET") return read(req, res);
  res.header("Allow", "GET, POST");
  res.text(405, "method not allowed\n");
}

// A client opens /ws: refused unless the path is /ws and since (if any) is a number; else it
// becomes a member and gets the history.
function onOpen(socket: Socket, req: Request, res: Response): void {
  if (req.path != "/ws") {
    res.text(404, "use /ws\n");
    return;
  }
  const since = parseSince(req);
  if (since == -2) {
    res.text(400, "since must be a number >= 0\n");
    return;
  }
  let history: Entry[];
  let more = false;
  if (since >= 0) {
    history = messagesAfter(since, MAX_CATCH_UP + 1);
    more = history.length > MAX_CATCH_UP;
    if (more) history.pop();
  } else {
    const newest = new ListOptions();
    newest.prefix = MESSAGE_PREFIX;
    newest.limit = HISTORY;
    newest.reverse = true;
    history = storage.list(newest).reverse();
  }
  for (let i = 0; i < history.length; i++) {
    const text = history[i].valueBytes;
    const l = line(keyNumber(history[i].keyBytes), text);
    if (isUtf8(text)) {
      socket.sendUtf8(l);
    } else {
      socket.sendBinary(l);
    }
  }
  if (more) {
    // Sent after the history; the client reconnects for the rest.
    const last = keyNumber(history[history.length - 1].keyBytes);
    socket.close(CLOSE_MORE_HISTORY, "more history: reconnect with since=" + last.toString());
    return;
  }
  socket.tag(MEMBER_TAG);
}

// A member's message: posted as POST /messages posts it (so it reaches every member, the
// sender too), or refused to the sender alone.
function onMessage(socket: Socket, msg: SocketMessage): void {
  if (!msg.isText) {
    socket.send("error\tbinary messages are not accepted (send text)");
    return;
  }
  const text = msg.bytes;
  const refusal = check(text);
  if (refusal !== null) {
    socket.send("error\t" + refusal.reason);
    return;
  }
  store(text);
}

export function wk_on_request(): i32 {
  return handleRequest(handle);
}

export function wk_on_socket_open(): i32 {
  return handleSocketOpen(onOpen);
}

export function wk_on_socket_message(): i32 {
  return handleSocketMessage(onMessage);
}
