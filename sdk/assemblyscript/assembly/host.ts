// host.ts: the host functions of ABI v1 (docs/abi.md), one declaration each, exactly as the
// node provides them under the import module "wasmkeep_v1". Nothing else is imported: the
// node refuses a module that imports anything docs/abi.md does not list.
//
// Pointers are addresses in the module's linear memory and lengths are read by the host as
// unsigned 32-bit numbers. Calls that produce data (request_get, request_header,
// storage_get, storage_list) place it in the event's result buffer and return its length
// (the count of entries for storage_list), or -1 for "absent"; result_read copies it out.
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
