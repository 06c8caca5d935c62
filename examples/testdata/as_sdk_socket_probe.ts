// A test actor for the WebSocket part of the AssemblyScript SDK
// (sdk/assemblyscript/assembly/sockets.ts): the twin of socket_sdk_probe.cc, with the same
// commands and answers (its header comment lists them), so a host test can hold both SDKs
// to one behaviour. Not an example. The C++ probe's "c" command (the C helpers) and
// GET /event are answered here through the raw host functions.
import {
  Request, Response, Socket, SocketMessage, SocketClose, sockets, storage, handleRequest, handleSocketOpen,
  handleSocketMessage, handleSocketClose, parseInt64, fromUtf8, utf8,
} from "wasmkeep";
import { result_read, socket_event_data, socket_event_id, socket_event_kind, socket_tags } from "wasmkeep/assembly/host";

// The result buffer's first n bytes as text; "-" when n < 0 (absent).
function take(n: i32): string {
  if (n < 0) return "-";
  const out = new Uint8Array(n);
  result_read(out.dataStart, <u32>n);
  return fromUtf8(out);
}

function ids(list: Socket[]): string {
  let out = "";
  for (let i = 0; i < list.length; i++) out += " " + list[i].id.toString();
  return out;
}

// The first word of text and the rest after one space.
function first(text: string): string {
  const space = text.indexOf(" ");
  return space < 0 ? text : text.substring(0, space);
}
function rest(text: string): string {
  const space = text.indexOf(" ");
  return space < 0 ? "" : text.substring(space + 1);
}

function onOpen(socket: Socket, req: Request, res: Response): void {
  if (req.path == "/refuse") {
    res.header("X-Why", "probe").text(403, "refused\n");
    return;
  }
  if (req.path == "/fail") throw new Error("the probe fails its open event");
  const tag = req.queryParam("tag");
  if (tag !== null) socket.tag(tag);
  const current = Socket.current();
  socket.send("open " + socket.id.toString() + " " + (current === null ? "-1" : current.id.toString()));
}

function onMessage(socket: Socket, msg: SocketMessage): void {
  if (msg.isBinary) {
    socket.send("binary " + msg.bytes.length.toString());
    return;
  }
  const text = msg.text;
  const command = first(text);
  const args = rest(text);
  if (command == "echo") {
    socket.send(args);
  } else if (command == "binary") {
    socket.sendBinary(utf8(args));
  } else if (command == "tag") {
    socket.send(socket.tag(args) ? "tag 1" : "tag 0");
  } else if (command == "tags") {
    const tags = socket.tags();
    socket.send("tags" + (tags === null || tags.length == 0 ? "" : " " + tags.join(" ")));
  } else if (command == "has") {
    socket.send(socket.hasTag(args) ? "has 1" : "has 0");
  } else if (command == "list") {
    socket.send("list" + ids(sockets.list(args)));
  } else if (command == "broadcast") {
    const tag = first(args);
    const n = sockets.broadcast(tag == "-" ? "" : tag, rest(args));
    socket.send("sent " + n.toString());
  } else if (command == "to") {
    const id = parseInt64(first(args));
    const queued = new Socket(id === null ? -1 : id.value).send(rest(args));
    socket.send(queued ? "to 1" : "to 0");
  } else if (command == "close") {
    const code = parseInt64(first(args));
    socket.close(code === null ? 1000 : <i32>code.value, rest(args));
  } else if (command == "fail") {
    throw new Error("the probe fails this message");
  } else if (command == "c") {
    const data = take(socket_event_data());
    const count = sockets.list().length;
    const tags = take(socket_tags(socket_event_id()));
    socket.send("c " + data + " " + count.toString() + " " + tags);
  }
}

function onClose(socket: Socket, close: SocketClose): void {
  storage.put("closed/" + socket.id.toString(), close.code.toString() + " " + close.reason);
}

function handle(req: Request, res: Response): void {
  if (req.path == "/closed") {
    let out = "";
    const entries = storage.list({ prefix: "closed/" });
    for (let i = 0; i < entries.length; i++) out += entries[i].key.substring(7) + " " + entries[i].value + "\n";
    res.text(200, out);
    return;
  }
  if (req.path == "/list") {
    const tag = req.queryParam("tag");
    const list = sockets.list(tag === null ? "" : tag);
    let out = "";
    for (let i = 0; i < list.length; i++) out += list[i].id.toString() + "\n";
    res.text(200, out);
    return;
  }
  if (req.path == "/broadcast" && req.method == "POST") {
    const tag = req.queryParam("tag");
    res.text(200, sockets.broadcast(tag === null ? "" : tag, req.body).toString() + "\n");
    return;
  }
  if (req.path == "/event") {
    const id = socket_event_id();
    const kind = socket_event_kind();
    const data = socket_event_data();
    res.text(200, id.toString() + " " + kind.toString() + " " + data.toString() + "\n");
    return;
  }
  res.text(404, "no such probe\n");
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
export function wk_on_socket_close(): i32 {
  return handleSocketClose(onClose);
}
