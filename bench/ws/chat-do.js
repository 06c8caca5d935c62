// The WebSocket room of examples/chat/chat.cc ("/ws", examples/chat/README.md) as a
// Cloudflare Durable Object on the hibernation API, for bench/ws_bench.sh: the same URL,
// the same messages.
//
//   GET /v1/actors/<tenant>/chat/<room>/ws  with Upgrade: websocket and the bearer token
//
// The stateless worker checks the token (as a WasmKeep node checks the tenant's) and routes
// to the object idFromName("<tenant>/<room>"). The object accepts the socket with
// ctx.acceptWebSocket(ws, ["member"]) and sends it the newest 50 messages (the chat actor's
// open does the same; the bench's rooms start empty). A text message is checked as the chat
// actor checks it, stored as the chat actor stores it ("last" holds the newest number,
// message N lives under "msg/" + N padded to 20 digits; both written in one put, one
// transaction), and sent as "<n>\t<text>" to ctx.getWebSockets("member"). The put is not
// awaited, as Durable Objects are written: workerd's output gate holds the sends until the
// write is on disk, as WasmKeep's holds an event's sends until its batch is durable.
//
// Hibernation: nothing lives in the object between events (no fields, no timers), so workerd
// can evict it while its sockets stay open; the next message constructs it again.
// `constructed` counts constructions in the worker's isolate (the objects of a namespace
// share it): GET /_constructed answers it, and the bench reads it before and after a message
// to tell whether the object had been evicted.
let constructed = 0;

const MEMBER = "member";
const HISTORY = 50;
const MAX_MESSAGE_BYTES = 4000;

// "msg/00000000000000000042" for 42.
function messageKey(n) {
  return "msg/" + String(n).padStart(20, "0");
}

// Why text is refused, or null: the chat actor's checks and reasons.
function refusal(text) {
  if (text.length === 0) return "empty message";
  if (new TextEncoder().encode(text).length > MAX_MESSAGE_BYTES) return "message over 4000 bytes";
  if (/[\r\n]/.test(text)) return "a message is one line (no CR or LF)";
  return null;
}

export class ChatRoom {
  constructor(ctx, env) {
    this.ctx = ctx;
    constructed++;
  }

  async fetch(request) {
    if (request.headers.get("Upgrade") !== "websocket") {
      return new Response("use a WebSocket on /ws\n", { status: 426 });
    }
    if (!new URL(request.url).pathname.endsWith("/ws")) return new Response("use /ws\n", { status: 404 });
    const pair = new WebSocketPair();
    this.ctx.acceptWebSocket(pair[1], [MEMBER]);
    const newest = await this.ctx.storage.list({ prefix: "msg/", reverse: true, limit: HISTORY });
    for (const [key, text] of [...newest].reverse()) {
      pair[1].send(`${Number(key.slice(4))}\t${text}`);
    }
    return new Response(null, { status: 101, webSocket: pair[0] });
  }

  async webSocketMessage(ws, message) {
    if (typeof message !== "string") {
      ws.send("error\tbinary messages are not accepted (send text)");
      return;
    }
    const why = refusal(message);
    if (why !== null) {
      ws.send(`error\t${why}`);
      return;
    }
    const n = ((await this.ctx.storage.get("last")) ?? 0) + 1;
    this.ctx.storage.put({ [messageKey(n)]: message, last: n });
    const line = `${n}\t${message}`;
    for (const member of this.ctx.getWebSockets(MEMBER)) {
      try {
        member.send(line);
      } catch {
        // A member closing right now: it gets nothing more, as in the chat actor.
      }
    }
  }

  async webSocketClose(ws, code) {
    // Answer the client's close (this compatibility date does not do it for us). 1005 and
    // 1006 are codes a close frame may not carry.
    try {
      ws.close(code === 1005 || code === 1006 ? 1000 : code, "");
    } catch {
      // Already closed.
    }
  }
}

const ROUTE = /^\/v1\/actors\/([a-z0-9][a-z0-9_-]*)\/chat\/([A-Za-z0-9._~-]+)(\/.*)?$/;

export default {
  async fetch(request, env) {
    if (request.headers.get("Authorization") !== `Bearer ${env.TOKEN}`) {
      return new Response("unauthorized\n", { status: 401 });
    }
    const path = new URL(request.url).pathname;
    if (path === "/_constructed") return new Response(`${constructed}\n`);
    const m = ROUTE.exec(path);
    if (!m) return new Response("not found\n", { status: 404 });
    const stub = env.CHAT.get(env.CHAT.idFromName(`${m[1]}/${m[2]}`));
    return stub.fetch(request);
  },
};
