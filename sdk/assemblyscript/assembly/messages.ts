// messages.ts: messages between actors (docs/sdk.md "Messages between actors").
//
// send() queues a message to another actor of the same tenant in the current event's batch:
// it exists only if the event succeeds, and is then delivered at least once and applied
// exactly once by the receiver's wk_on_message export (handleMessage), after every earlier
// message from the same sender to the same receiver. A reply is a message back:
// send(msg.sender, ...).

import { fromUtf8, takeResult, utf8 } from "./bytes";
import { MESSAGE_BODY, MESSAGE_SENDER, message_get, message_retry_count, message_send, message_seq } from "./host";

// Sends `body` to the actor `to`: "class/name", or "tenant/class/name" naming this actor's
// own tenant. Returns the message's sequence number (> 0, increasing per sender). A bad
// name, another tenant, a body over actors.max_message_bytes (64 KiB by default) or more
// than actors.max_messages_per_event sends in one event (64) fail the event.
export function send(to: string, body: string): i64 {
  return sendBytes(to, utf8(body));
}

// send() with a binary body.
export function sendBytes(to: string, body: Uint8Array): i64 {
  const name = utf8(to);
  return message_send(name.dataStart, <u32>name.length, body.dataStart, <u32>body.length);
}

function fieldBytes(field: i32): Uint8Array {
  const bytes = takeResult(message_get(field));
  return bytes === null ? new Uint8Array(0) : bytes;
}

// The message a message handler is given. Each field is read from the host on first use
// and kept for the event.
export class Message {
  private _sender: string | null = null;
  private _body: Uint8Array | null = null;

  // The sender's full name, "tenant/class/name".
  get sender(): string {
    let v = this._sender;
    if (v === null) this._sender = v = fromUtf8(fieldBytes(MESSAGE_SENDER));
    return v;
  }

  // The body as bytes, exactly as sent.
  get bodyBytes(): Uint8Array {
    let v = this._body;
    if (v === null) this._body = v = fieldBytes(MESSAGE_BODY);
    return v;
  }

  // The body decoded from UTF-8.
  get body(): string {
    return fromUtf8(this.bodyBytes);
  }

  // The sequence number the sender's send() returned (per sender, increasing in send order).
  get seq(): i64 {
    return message_seq();
  }

  // How many earlier runs of this message failed (0 on its first run).
  get retryCount(): i32 {
    return message_retry_count();
  }

  // True when an earlier run of this message failed.
  get isRetry(): bool {
    return message_retry_count() > 0;
  }
}

// Runs a message handler as the body of the wk_on_message export:
//
//   export function wk_on_message(): i32 { return handleMessage(onMessage); }
//
// Returning applies the message: its writes commit with the record that it was applied, so
// it takes effect exactly once. Throwing fails the run: its writes are discarded and the
// message is retried with back-off, then parked as dead after a bound.
export function handleMessage(handler: (msg: Message) => void): i32 {
  handler(new Message());
  __collect();
  return 0;
}
