// chat: a chat room per actor; the AssemblyScript twin of examples/chat/chat.cc, with the
// same HTTP behaviour and the same storage layout (a room written by one reads in the other).
//
//   POST /messages           appends the body as the next message; answers its number ("3\n")
//   GET  /messages?since=N   the messages numbered above N (default 0), oldest first, one per
//                            line as "<number>\t<text>\n"; at most MAX_MESSAGES_PER_RESPONSE
//                            of them, so a client polls again with since=<last number it got>
//
// Storage: "last" holds the newest message's number (decimal text); message N lives under
// "msg/" + N zero-padded to 20 digits, so key order is message order and a range listing
// from "msg/<N+1>" reads the messages after N. An append reads "last", writes the message
// and "last" in one event: one atomic batch, so numbers never repeat or skip.
//
// Messages are handled as bytes (Request.bodyBytes, storage.putBytes): the limit counts
// bytes as the C++ twin does, and a message that is not UTF-8 comes back byte for byte.
import { Request, Response, storage, handleRequest, parseInt64, ListOptions, prefixEnd, utf8 } from "wasmkeep";

const LAST_KEY = "last";
const MESSAGE_PREFIX = "msg/";
// One message is one line of the answer, at most "<20 digits>\t<text>\n": both bounds
// together keep a full page (200 * 4022 bytes) inside the node's default max_response_bytes
// (1 MiB).
const MAX_MESSAGE_BYTES = 4000;
const MAX_MESSAGES_PER_RESPONSE = 200;

// "msg/00000000000000000042" for 42 (20 digits hold every i64).
function messageKey(n: i64): string {
  return MESSAGE_PREFIX + n.toString().padStart(20, "0");
}

function append(req: Request, res: Response): void {
  const text = req.bodyBytes;
  if (text.length == 0) {
    res.text(400, "empty message\n");
    return;
  }
  if (text.length > MAX_MESSAGE_BYTES) {
    res.text(413, "message over 4000 bytes\n");
    return;
  }
  if (text.includes(0x0d) || text.includes(0x0a)) {
    res.text(400, "a message is one line (no CR or LF)\n");
    return;
  }
  const n = storage.getInt(LAST_KEY) + 1;
  storage.putBytes(messageKey(n), text);
  storage.putInt(LAST_KEY, n);
  res.text(200, n.toString() + "\n");
}

function read(req: Request, res: Response): void {
  let since: i64 = 0;
  const sinceText = req.queryParam("since");
  if (sinceText !== null) {
    const parsed = parseInt64(sinceText);
    if (parsed === null || parsed.value < 0) {
      res.text(400, "since must be a number >= 0\n");
      return;
    }
    since = parsed.value;
  }
  res.status(200).header("Content-Type", "text/plain; charset=utf-8");
  if (since == i64.MAX_VALUE) return;
  const options = new ListOptions();
  options.startBytes = utf8(messageKey(since + 1));
  options.endBytes = prefixEnd(utf8(MESSAGE_PREFIX));
  options.limit = MAX_MESSAGES_PER_RESPONSE;
  const entries = storage.list(options);
  // The answer is assembled in one buffer and written with one host call: the numbers are
  // ASCII, the messages bytes as stored.
  const numbers = new Array<string>(entries.length);
  let size = 0;
  for (let i = 0; i < entries.length; i++) {
    const digits = entries[i].keyBytes.subarray(MESSAGE_PREFIX.length);
    let n: i64 = 0;
    for (let j = 0; j < digits.length; j++) n = n * 10 + <i64>(digits[j] - 0x30);
    numbers[i] = n.toString();
    size += numbers[i].length + 1 + entries[i].valueBytes.length + 1;
  }
  const answer = new Uint8Array(size);
  let pos = 0;
  for (let i = 0; i < entries.length; i++) {
    const number = numbers[i];
    for (let j = 0; j < number.length; j++) answer[pos++] = <u8>number.charCodeAt(j);
    answer[pos++] = 0x09;  // tab
    answer.set(entries[i].valueBytes, pos);
    pos += entries[i].valueBytes.length;
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

export function wk_on_request(): i32 {
  return handleRequest(handle);
}
