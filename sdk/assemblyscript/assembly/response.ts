// response.ts: the response of the current event (docs/abi.md "The response").
//
// Every call goes straight to the host, which holds the response and sends it only when the
// handler returns and the event's writes are durable. It starts as 200, no headers, empty
// body; the calls chain: res.status(201).header("Location", url).write("made\n").
//
// The host enforces the limits, and breaking one fails the event (the caller gets an
// error, the event's writes are discarded): a status outside 100..599; a header name that
// is not an HTTP token or a value holding CR, LF or NUL; a body plus header names and
// values over actors.max_response_bytes (1 MiB by default).

import { JsonValue } from "./json";
import { utf8 } from "./bytes";
import { response_add_header, response_set_status, response_write } from "./host";

export class Response {
  // Sets the status (100..599).
  status(code: i32): Response {
    response_set_status(code);
    return this;
  }

  // Adds a header.
  header(name: string, value: string): Response {
    const n = utf8(name);
    const v = utf8(value);
    response_add_header(n.dataStart, <u32>n.length, v.dataStart, <u32>v.length);
    return this;
  }

  // Appends text, encoded as UTF-8, to the body.
  write(text: string): Response {
    return this.writeBytes(utf8(text));
  }

  // Appends bytes to the body.
  writeBytes(data: Uint8Array): Response {
    response_write(data.dataStart, <u32>data.length);
    return this;
  }

  // Status, "Content-Type: text/plain; charset=utf-8" and the body, in one call.
  text(code: i32, body: string): Response {
    return this.status(code).header("Content-Type", "text/plain; charset=utf-8").write(body);
  }

  // Status, "Content-Type: application/json" and the value's JSON text plus a newline.
  json(code: i32, value: JsonValue): Response {
    return this.status(code).header("Content-Type", "application/json").write(value.toString() + "\n");
  }
}
