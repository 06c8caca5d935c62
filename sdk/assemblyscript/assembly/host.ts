// host.ts: the host functions of ABI v1 (docs/abi.md), one declaration each, exactly as the
// node provides them under the import module "wasmkeep_v1". Nothing else is imported: the
// node refuses a module that imports anything docs/abi.md does not list.
//
// Pointers are addresses in the module's linear memory and lengths are read by the host as
// unsigned 32-bit numbers. Calls that produce data (request_get, request_header,
// storage_get, storage_list, message_get, socket_event_data, socket_list, socket_tags)
// place it in the event's result buffer and return its length (the count of entries for
// storage_list and socket_list), or -1 for "absent"; result_read copies it out.
// The next such call replaces the buffer, so read it at once (bytes.ts does).
//
// Actors normally use the SDK's classes (index.ts) instead; these stay exported for the rare
// actor that needs a call the classes do not shape the way it wants.

// Fields of request_get.
export const REQUEST_METHOD: i32 = 0;
export const REQUEST_PATH: i32 = 1;
export const REQUEST_QUERY: i32 = 2;
export const REQUEST_BODY: i32 = 3;
export const REQUEST_HEADERS: i32 = 4;

// Levels of log.
export const LOG_DEBUG: i32 = 0;
export const LOG_INFO: i32 = 1;
export const LOG_WARN: i32 = 2;
export const LOG_ERROR: i32 = 3;

// Flag bits of storage_list.
export const LIST_REVERSE: i32 = 1;
export const LIST_PREFIX: i32 = 2;

// Most bytes random_fill writes in one call (docs/abi.md).
export const RANDOM_FILL_MAX_BYTES: i32 = 65536;

// ---- Result buffer

// @ts-ignore: decorator
@external("wasmkeep_v1", "result_read")
export declare function result_read(dst: usize, len: u32): i32;

// ---- The request

// @ts-ignore: decorator
@external("wasmkeep_v1", "request_get")
export declare function request_get(field: i32): i32;

// @ts-ignore: decorator
@external("wasmkeep_v1", "request_header")
export declare function request_header(name: usize, name_len: u32): i32;

// ---- The response (starts as 200, no headers, empty body)

// @ts-ignore: decorator
@external("wasmkeep_v1", "response_set_status")
export declare function response_set_status(status: i32): void;

// @ts-ignore: decorator
@external("wasmkeep_v1", "response_add_header")
export declare function response_add_header(name: usize, name_len: u32, value: usize, value_len: u32): void;

// @ts-ignore: decorator
@external("wasmkeep_v1", "response_write")
export declare function response_write(data: usize, len: u32): void;

// ---- Storage (every call of one event is one atomic batch)

// @ts-ignore: decorator
@external("wasmkeep_v1", "storage_get")
export declare function storage_get(key: usize, key_len: u32): i32;

// @ts-ignore: decorator
@external("wasmkeep_v1", "storage_put")
export declare function storage_put(key: usize, key_len: u32, value: usize, value_len: u32): void;

// @ts-ignore: decorator
@external("wasmkeep_v1", "storage_delete")
export declare function storage_delete(key: usize, key_len: u32): i32;

// @ts-ignore: decorator
@external("wasmkeep_v1", "storage_delete_all")
export declare function storage_delete_all(): void;

// @ts-ignore: decorator
@external("wasmkeep_v1", "storage_list")
export declare function storage_list(start: usize, start_len: u32, end: usize, end_len: u32, limit: i32, flags: i32): i32;

// ---- Alarms (one per actor, ms since the Unix epoch)

// @ts-ignore: decorator
@external("wasmkeep_v1", "alarm_set")
export declare function alarm_set(time_ms: i64): void;

// @ts-ignore: decorator
@external("wasmkeep_v1", "alarm_get")
export declare function alarm_get(): i64;

// @ts-ignore: decorator
@external("wasmkeep_v1", "alarm_delete")
export declare function alarm_delete(): void;

// In wk_on_alarm: 0 on the alarm's first run, n on its n-th retry; -1 in a request. Added
// to wasmkeep_v1 with alarm delivery (docs/abi.md): imported only by modules that use it.
// @ts-ignore: decorator
@external("wasmkeep_v1", "alarm_retry_count")
export declare function alarm_retry_count(): i32;

// ---- Messages between actors (docs/sdk.md "Messages between actors"). Additions to wasmkeep_v1, imported
// only by modules that use them: such a module needs a node that delivers messages.

// Fields of message_get.
export const MESSAGE_SENDER: i32 = 0;
export const MESSAGE_BODY: i32 = 1;

// Queues a message to `to` ("class/name", or "tenant/class/name" of the sender's own
// tenant) in this event's batch; returns its sequence number (> 0, increasing per sender).
// A bad name, another tenant, a body over actors.max_message_bytes or more than
// actors.max_messages_per_event sends fail the event.
// @ts-ignore: decorator
@external("wasmkeep_v1", "message_send")
export declare function message_send(to: usize, to_len: u32, body: usize, body_len: u32): i64;

// In wk_on_message: puts field MESSAGE_* in the result buffer, returns its length; -1
// outside a message event.
// @ts-ignore: decorator
@external("wasmkeep_v1", "message_get")
export declare function message_get(field: i32): i32;

// In wk_on_message: the message's sequence number (per sender); 0 outside one.
// @ts-ignore: decorator
@external("wasmkeep_v1", "message_seq")
export declare function message_seq(): i64;

// In wk_on_message: how many earlier runs of this message failed (0 on the first).
// @ts-ignore: decorator
@external("wasmkeep_v1", "message_retry_count")
export declare function message_retry_count(): i32;

// ---- WebSockets (docs/abi.md "WebSockets", docs/sdk.md "WebSockets"). Additions to
// wasmkeep_v1, imported only by modules that use them: such a module needs a node that holds
// WebSockets. A connection is an i64 id. socket_send, socket_broadcast and socket_close take
// effect only after the event's writes are durable, in call order, and not at all if the
// event fails.

// Kinds of a WebSocket message (socket_event_kind in wk_on_socket_message) and of a send.
export const SOCKET_TEXT: i32 = 1;
export const SOCKET_BINARY: i32 = 2;

// The connection of this socket event (wk_on_socket_open, _message, _close); -1 in another.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_event_id")
export declare function socket_event_id(): i64;

// wk_on_socket_message: SOCKET_TEXT or SOCKET_BINARY; wk_on_socket_close: the close code
// received (1005: none in the frame, 1006: no close frame); 0 in wk_on_socket_open; -1 in
// another event.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_event_kind")
export declare function socket_event_kind(): i32;

// Puts the message (wk_on_socket_message) or the close reason (wk_on_socket_close) in the
// result buffer, returns its length; -1 in another event.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_event_data")
export declare function socket_event_data(): i32;

// Queues a message to connection id (text if binary is 0); 1 if queued, 0 if id is not one
// of the actor's open connections. Over websockets.max_message_bytes fails the event.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_send")
export declare function socket_send(id: i64, data: usize, len: u32, binary: i32): i32;

// Queues one message to every open connection with the tag (empty: all); returns how many.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_broadcast")
export declare function socket_broadcast(tag: usize, tag_len: u32, data: usize, len: u32, binary: i32): i32;

// Closes connection id with code (1000 or 3000..4999) and a reason of at most 123 bytes
// (else the event fails), after what the event sent before; 1, or 0 if id is not open.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_close")
export declare function socket_close(id: i64, code: i32, reason: usize, reason_len: u32): i32;

// Adds a tag (1 to 64 bytes, no "\n"; at most 8 per connection, else the event fails) to
// connection id; 1, or 0 if id is not open.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_tag")
export declare function socket_tag(id: i64, tag: usize, tag_len: u32): i32;

// Puts the ids of the open connections with the tag (empty: all) in the result buffer, 8
// bytes each, little-endian, in the order they opened; returns how many.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_list")
export declare function socket_list(tag: usize, tag_len: u32): i32;

// Puts the tags of connection id in the result buffer, each followed by "\n", and returns
// the length; -1 if id is not open.
// @ts-ignore: decorator
@external("wasmkeep_v1", "socket_tags")
export declare function socket_tags(id: i64): i32;

// ---- Time, randomness, logging, durability

// @ts-ignore: decorator
@external("wasmkeep_v1", "now_ms")
export declare function now_ms(): i64;

// @ts-ignore: decorator
@external("wasmkeep_v1", "random_fill")
export declare function random_fill(dst: usize, len: u32): void;

// @ts-ignore: decorator
@external("wasmkeep_v1", "log")
export declare function log(level: i32, msg: usize, msg_len: u32): void;

// @ts-ignore: decorator
@external("wasmkeep_v1", "sync")
export declare function sync(): i32;
