// storage.ts: the actor's storage (docs/abi.md "Storage"), as the object `storage`.
//
// A sorted map from keys (1 to actors.max_key_bytes bytes, 2048 by default) to values (0 to
// actors.max_value_bytes, 128 KiB by default), compared as unsigned bytes. A string key or
// value is stored as its UTF-8 bytes, so the limits count bytes, not string length. Every
// call of one event belongs to one atomic batch: reads see the event's own writes, and the
// batch commits when the handler returns (and is discarded if the event fails). A key or
// value over its limit, or an actor over actors.max_stored_bytes (64 MiB), fails the event.
//
// Values come as text (get/put), bytes (getBytes/putBytes), decimal integers
// (getInt/putInt) or JSON (getJSON/putJSON). A stored value that is not what the typed
// getter expects is the actor's own bug: it is logged and the event traps.

import { Json, JsonValue } from "./json";
import { compareBytes, fail, fromUtf8, parseInt64, prefixEnd, takeResult, utf8 } from "./bytes";
import { LIST_REVERSE, result_read, storage_delete, storage_delete_all, storage_get, storage_list, storage_put } from "./host";

// What to list: keys with `prefix` (empty: any), at or after `start`, before `end` (empty:
// no upper bound), at most `limit` of them (0 or less: no limit), in descending order if
// `reverse`. The bounds combine: prefix "msg/" with start "msg/0005" lists the keys of the
// prefix from "msg/0005" on. Each *Bytes bound, when set, replaces its text twin (for keys
// that are not UTF-8 text). Object literals work: storage.list({ prefix: "msg/", limit: 10 }).
export class ListOptions {
  prefix: string = "";
  start: string = "";
  end: string = "";
  limit: i32 = 0;
  reverse: bool = false;
  prefixBytes: Uint8Array | null = null;
  startBytes: Uint8Array | null = null;
  endBytes: Uint8Array | null = null;
}

// Entries per storage_list call of a Cursor unless told otherwise: a page holds values too,
// so 32 values of at most 128 KiB is 4 MiB, well inside an actor's 16 MiB of memory.
export const DEFAULT_PAGE_ENTRIES: i32 = 32;

// One stored entry. keyBytes and valueBytes are the stored bytes; key and value decode them.
export class Entry {
  constructor(readonly keyBytes: Uint8Array, readonly valueBytes: Uint8Array) {}
  get key(): string {
    return fromUtf8(this.keyBytes);
  }
  get value(): string {
    return fromUtf8(this.valueBytes);
  }
}

function readLe32(data: Uint8Array, pos: i32): u32 {
  return <u32>data[pos] | (<u32>data[pos + 1] << 8) | (<u32>data[pos + 2] << 16) | (<u32>data[pos + 3] << 24);
}

// Bytes that count entries take if all lie within data[0, size); else a number > size: how
// far the buffer must reach to hold more.
function listingExtent(data: Uint8Array, size: i32, count: i32): i64 {
  let pos: i64 = 0;
  for (let i = 0; i < count; i++) {
    for (let part = 0; part < 2; part++) {  // the key, then the value
      if (pos + 4 > <i64>size) return pos + 4;
      pos += 4 + <i64>readLe32(data, <i32>pos);
      if (pos > <i64>size) return pos;
    }
  }
  return pos;
}

// Runs storage_list over [low, high) (high empty: unbounded) and decodes its answer. The
// host returns the count, not the byte size, and result_read copies from the start of the
// buffer, so the read grows until every entry is inside it.
function fetch(low: Uint8Array, high: Uint8Array, limit: i32, reverse: bool): Entry[] {
  const count = storage_list(low.dataStart, <u32>low.length, high.dataStart, <u32>high.length, limit,
                             reverse ? LIST_REVERSE : 0);
  const out: Entry[] = [];
  if (count <= 0) return out;
  let capacity: i64 = 256 + <i64>count * 64;
  let data = new Uint8Array(0);
  for (;;) {
    if (capacity > <i64>i32.MAX_VALUE) fail("storage.list: a listing over 2 GiB");
    data = new Uint8Array(<i32>capacity);
    const got = result_read(data.dataStart, <u32>capacity);
    const extent = listingExtent(data, got, count);
    if (extent <= <i64>got) break;
    // Less than asked for, yet incomplete: the host broke docs/abi.md's encoding.
    if (<i64>got < capacity) fail("storage.list: the host's listing is truncated");
    capacity = extent + 8 > capacity * 2 ? extent + 8 : capacity * 2;
  }
  let pos = 0;
  for (let i = 0; i < count; i++) {
    const keyLen = <i32>readLe32(data, pos);
    const key = data.subarray(pos + 4, pos + 4 + keyLen);
    pos += 4 + keyLen;
    const valueLen = <i32>readLe32(data, pos);
    const value = data.subarray(pos + 4, pos + 4 + valueLen);
    pos += 4 + valueLen;
    out.push(new Entry(key, value));
  }
  return out;
}

// The range [low, high) that options select (high empty: no upper bound).
class Range {
  constructor(public low: Uint8Array, public high: Uint8Array) {}
}

function rangeOf(options: ListOptions): Range {
  const pb = options.prefixBytes;
  const sb = options.startBytes;
  const eb = options.endBytes;
  const prefix = pb !== null ? pb : utf8(options.prefix);
  let low = sb !== null ? sb : utf8(options.start);
  let high = eb !== null ? eb : utf8(options.end);
  if (prefix.length > 0) {
    if (compareBytes(prefix, low) > 0) low = prefix;
    const pend = prefixEnd(prefix);
    if (pend.length > 0 && (high.length == 0 || compareBytes(pend, high) < 0)) high = pend;
  }
  return new Range(low, high);
}

// Reads entries a page at a time, so memory stays bounded by the page, not the listing:
//
//   const c = storage.cursor({ prefix: "doc/" });
//   for (let e = c.next(); e !== null; e = c.next()) { ... e.key, e.value ... }
//
// The entries are those of the pages as each was read: a write during the walk may or may
// not show, but no key is seen twice and none is skipped that existed throughout.
export class Cursor {
  private low: Uint8Array;
  private high: Uint8Array;
  private page: Entry[] = [];
  private index: i32 = 0;
  private remaining: i64;
  private reverse: bool;
  private exhausted: bool = false;

  constructor(options: ListOptions, private pageSize: i32) {
    const r = rangeOf(options);
    this.low = r.low;
    this.high = r.high;
    this.remaining = options.limit > 0 ? <i64>options.limit : i64.MAX_VALUE;
    this.reverse = options.reverse;
    if (this.pageSize <= 0) this.pageSize = DEFAULT_PAGE_ENTRIES;
  }

  // The next entry, or null after the last.
  next(): Entry | null {
    if (this.index == this.page.length) {
      if (this.exhausted || this.remaining <= 0) return null;
      const want = this.remaining < <i64>this.pageSize ? <i32>this.remaining : this.pageSize;
      this.page = fetch(this.low, this.high, want, this.reverse);
      this.index = 0;
      this.remaining -= this.page.length;
      if (this.page.length < want) this.exhausted = true;
      if (this.page.length == 0) return null;
      const last = this.page[this.page.length - 1].keyBytes;
      if (this.reverse) {
        this.high = last;  // exclusive: the next page ends before the last key seen
      } else {
        // The smallest key after the last one seen: the same bytes and a 0 byte.
        const after = new Uint8Array(last.length + 1);
        after.set(last);
        this.low = after;
      }
    }
    return this.page[this.index++];
  }
}

function failBadValue(getter: string, key: string, what: string): void {
  fail("storage." + getter + ": the value under \"" + key + "\" is not " + what);
}

// Keys and values as raw bytes, for keys that are not UTF-8 text: `storage.raw`.
export class RawStorage {
  // The value under key, or null if absent.
  get(key: Uint8Array): Uint8Array | null {
    return takeResult(storage_get(key.dataStart, <u32>key.length));
  }
  // Sets key to value.
  put(key: Uint8Array, value: Uint8Array): void {
    storage_put(key.dataStart, <u32>key.length, value.dataStart, <u32>value.length);
  }
  // Removes key; true if it existed.
  delete(key: Uint8Array): bool {
    return storage_delete(key.dataStart, <u32>key.length) == 1;
  }
}

export class Storage {
  // The byte-key variants.
  readonly raw: RawStorage = new RawStorage();

  // The value under key as text, or null if absent.
  get(key: string): string | null {
    const v = this.raw.get(utf8(key));
    return v === null ? null : fromUtf8(v);
  }
  // The value under key as bytes, or null if absent.
  getBytes(key: string): Uint8Array | null {
    return this.raw.get(utf8(key));
  }
  // True if key is stored.
  has(key: string): bool {
    const k = utf8(key);
    return storage_get(k.dataStart, <u32>k.length) >= 0;
  }
  // Stores text under key.
  put(key: string, value: string): void {
    this.raw.put(utf8(key), utf8(value));
  }
  // Stores bytes under key.
  putBytes(key: string, value: Uint8Array): void {
    this.raw.put(utf8(key), value);
  }
  // Removes key; true if it existed.
  delete(key: string): bool {
    return this.raw.delete(utf8(key));
  }
  // Removes every key of this actor (the alarm is kept).
  deleteAll(): void {
    storage_delete_all();
  }

  // The integer stored as decimal text under key (as the C++ SDK's put_int64 writes it), or
  // fallback if absent. Another value traps.
  getInt(key: string, fallback: i64 = 0): i64 {
    const text = this.get(key);
    if (text === null) return fallback;
    const parsed = parseInt64(text);
    if (parsed === null) {
      failBadValue("getInt", key, "a decimal i64");
      return 0;
    }
    return parsed.value;
  }
  // Stores value as decimal text under key.
  putInt(key: string, value: i64): void {
    this.put(key, value.toString());
  }

  // The JSON value stored under key, or null if absent. A value that is not JSON traps.
  getJSON(key: string): JsonValue | null {
    const text = this.get(key);
    if (text === null) return null;
    const value = Json.parse(text);
    if (value === null) failBadValue("getJSON", key, "JSON (" + Json.lastError + ")");
    return value;
  }
  // Stores value's JSON text under key.
  putJSON(key: string, value: JsonValue): void {
    this.put(key, Json.stringify(value));
  }

  // The entries options select, in one host call, copied into the actor's memory values
  // included: bound it with limit, or use cursor(), when values are large or many.
  list(options: ListOptions | null = null): Entry[] {
    const o = options === null ? new ListOptions() : options;
    const r = rangeOf(o);
    if (r.high.length > 0 && compareBytes(r.low, r.high) >= 0) return [];
    return fetch(r.low, r.high, o.limit, o.reverse);
  }

  // A Cursor over the entries options select, pageSize entries per host call.
  cursor(options: ListOptions | null = null, pageSize: i32 = DEFAULT_PAGE_ENTRIES): Cursor {
    return new Cursor(options === null ? new ListOptions() : options, pageSize);
  }
}

// The actor's storage.
// @lazy: made on first use, inside an event, after the runtime is set up (see actor.ts, log).
// @ts-ignore: decorator
@lazy export const storage = new Storage();
