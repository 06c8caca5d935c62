// sockets.ts: WebSockets (docs/sdk.md "WebSockets", docs/abi.md "WebSockets").
//
// Clients open WebSockets to the actor's paths. The node holds the connections, not the
// instance: they stay open while the actor leaves memory (hibernation), and the next message
// starts it again from its durable state. So what a connection needs is kept in its tags or
// in storage, never in globals. A connection is a Socket, a value holding its id.
//
// What an event sends (Socket.send, sendBinary, close, sockets.broadcast) leaves only after
// the event's writes are durable, in the order the event made the calls, and not at all if
// the event fails (the output gate). The calls return at once; sending happens later.
//
// The exports are one line each, handing a handler to the SDK:
//
//   export function wk_on_socket_open(): i32 { return handleSocketOpen(onOpen); }
//   export function wk_on_socket_message(): i32 { return handleSocketMessage(onMessage); }
//   export function wk_on_socket_close(): i32 { return handleSocketClose(onClose); }

import { Request } from "./request";
import { Response } from "./response";
import { fromUtf8, takeResult, utf8 } from "./bytes";
import {
  SOCKET_BINARY, SOCKET_TEXT, socket_broadcast, socket_close, socket_event_data, socket_event_id, socket_event_kind,
  socket_list, socket_send, socket_tag, socket_tags,
} from "./host";

// Close codes (RFC 6455). An actor closes with CLOSE_NORMAL or a code of 3000..4999; the
// others are what a close handler may see.
export const CLOSE_NORMAL: i32 = 1000;
export const CLOSE_GOING_AWAY: i32 = 1001;  // the client left, or the node stops
export const CLOSE_NO_STATUS: i32 = 1005;   // the close frame had no code
export const CLOSE_ABNORMAL: i32 = 1006;    // the connection ended without a close frame
export const CLOSE_RESTART: i32 = 1012;     // the actor's owner changed: the client should reconnect

// One of the actor's WebSocket connections. Calls on a connection that is no longer open do
// nothing and say so (false, null).
export class Socket {
  constructor(readonly id: i64) {}

  // The connection of the current socket event (open, message or close); null in another.
  static current(): Socket | null {
    const id = socket_event_id();
    return id == -1 ? null : new Socket(id);
  }

  // Queues a text message (encoded as UTF-8). False if the connection is not open (nothing
  // queued). A message over websockets.max_message_bytes fails the event.
  send(text: string): bool {
    const data = utf8(text);
    return socket_send(this.id, data.dataStart, <u32>data.length, 0) == 1;
  }

  // Queues a binary message; as send otherwise.
  sendBinary(data: Uint8Array): bool {
    return socket_send(this.id, data.dataStart, <u32>data.length, 1) == 1;
  }

  // Queues a text message whose UTF-8 bytes the caller already has (a message kept as bytes,
  // sent on unchanged); they should be valid UTF-8 (isUtf8), else send them with sendBinary.
  sendUtf8(data: Uint8Array): bool {
    return socket_send(this.id, data.dataStart, <u32>data.length, 0) == 1;
  }

  // Closes the connection with code (1000, or 3000..4999) and a reason of at most 123 UTF-8
  // bytes (anything else fails the event), after what this event sent to it before. False
  // if it is not open.
  close(code: i32 = CLOSE_NORMAL, reason: string = ""): bool {
    const r = utf8(reason);
    return socket_close(this.id, code, r.dataStart, <u32>r.length) == 1;
  }

  // Adds a tag (1 to 64 bytes, no "\n"; at most 8 per connection, else the event fails),
  // seen by the rest of the event at once and kept if it succeeds. False if not open.
  tag(tag: string): bool {
    const t = utf8(tag);
    return socket_tag(this.id, t.dataStart, <u32>t.length) == 1;
  }

  // The connection's tags, as the host lists them; null if it is not open.
  tags(): string[] | null {
    const all = takeResult(socket_tags(this.id));
    if (all === null) return null;
    const text = fromUtf8(all);
    const out: string[] = [];
    const parts = text.split("\n");
    for (let i = 0; i < parts.length; i++) {
      if (parts[i].length > 0) out.push(parts[i]);
    }
    return out;
  }

  // Whether the connection is open and has the tag.
  hasTag(tag: string): bool {
    const all = this.tags();
    return all !== null && all.includes(tag);
  }
}

// The actor's connections as a whole, as the object `sockets`.
export class Sockets {
  // The open connections with the tag (empty: all of them), in the order they opened: those
  // open when the event started, plus the one it opens.
  list(tag: string = ""): Socket[] {
    const t = utf8(tag);
    const count = socket_list(t.dataStart, <u32>t.length);
    const out: Socket[] = [];
    if (count <= 0) return out;
    const raw = takeResult(count * 8);
    if (raw === null || raw.length < count * 8) unreachable();  // the host broke docs/abi.md
    for (let i = 0; i < count; i++) out.push(new Socket(load<i64>(raw!.dataStart + <usize>(i * 8))));
    return out;
  }

  // Queues one text message to every open connection with the tag (empty: all of them);
  // returns how many. The message's bytes are held once, whatever the count.
  broadcast(tag: string, text: string): i32 {
    return this.broadcastData(tag, utf8(text), false);
  }

  // broadcast() of a binary message.
  broadcastBinary(tag: string, data: Uint8Array): i32 {
    return this.broadcastData(tag, data, true);
  }

  // broadcast() of a text message whose UTF-8 bytes the caller already has (see
  // Socket.sendUtf8).
  broadcastUtf8(tag: string, data: Uint8Array): i32 {
    return this.broadcastData(tag, data, false);
  }

  private broadcastData(tag: string, data: Uint8Array, binary: bool): i32 {
    const t = utf8(tag);
    return socket_broadcast(t.dataStart, <u32>t.length, data.dataStart, <u32>data.length, binary ? 1 : 0);
  }
}
// @ts-ignore: decorator (@lazy: made on first use, inside an event; see actor.ts)
@lazy export const sockets = new Sockets();

// The event's message or close reason; empty outside a socket event.
function eventData(): Uint8Array {
  const bytes = takeResult(socket_event_data());
  return bytes === null ? new Uint8Array(0) : bytes;
}

// The message a socket message handler is given; its data is read from the host on first
// use and kept for the event.
export class SocketMessage {
  private _bytes: Uint8Array | null = null;

  // SOCKET_TEXT (1) or SOCKET_BINARY (2).
  get kind(): i32 {
    return socket_event_kind();
  }
  get isText(): bool {
    return socket_event_kind() == SOCKET_TEXT;
  }
  get isBinary(): bool {
    return socket_event_kind() == SOCKET_BINARY;
  }

  // The message as bytes, exactly as received (a text message is valid UTF-8: the node
  // closes a client that sends anything else, with 1007).
  get bytes(): Uint8Array {
    let v = this._bytes;
    if (v === null) this._bytes = v = eventData();
    return v;
  }

  // The message decoded from UTF-8.
  get text(): string {
    return fromUtf8(this.bytes);
  }
}

// How a connection ended, as a socket close handler is told.
export class SocketClose {
  // The close code received: the client's, CLOSE_NO_STATUS (1005) when its close frame had
  // none, CLOSE_ABNORMAL (1006) when the connection ended without one.
  get code(): i32 {
    return socket_event_kind();
  }

  // The close reason received, as bytes ("" if none).
  get reasonBytes(): Uint8Array {
    return eventData();
  }

  // The close reason decoded from UTF-8.
  get reason(): string {
    return fromUtf8(this.reasonBytes);
  }
}

// Runs a handler as the body of the wk_on_socket_open export. The request is the handshake
// (method GET, path, query, headers, no body). Returning accepts the connection, unless the
// handler set a status of 400..599 on the response: the client then gets that response (a
// refusal). Throwing refuses it with 500 and discards the event's writes. Without this
// export every handshake is accepted.
export function handleSocketOpen(handler: (socket: Socket, req: Request, res: Response) => void): i32 {
  handler(new Socket(socket_event_id()), new Request(), new Response());
  __collect();
  return 0;
}

// Runs a handler as the body of the wk_on_socket_message export: one message on one
// connection. Returning commits its writes and releases what it sent; throwing discards both
// and closes that connection with 1011. A module without this export takes no WebSockets (a
// handshake is answered 404).
export function handleSocketMessage(handler: (socket: Socket, msg: SocketMessage) => void): i32 {
  handler(new Socket(socket_event_id()), new SocketMessage());
  __collect();
  return 0;
}

// Runs a handler as the body of the wk_on_socket_close export: the connection has ended
// (closed by the client, a bound, the actor, or lost); it is no longer listed and sends to
// it are dropped. Throwing discards the event's writes.
export function handleSocketClose(handler: (socket: Socket, close: SocketClose) => void): i32 {
  handler(new Socket(socket_event_id()), new SocketClose());
  __collect();
  return 0;
}
