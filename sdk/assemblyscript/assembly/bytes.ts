// bytes.ts: the SDK's byte-level helpers. The host speaks bytes (docs/abi.md: "Strings are
// byte strings"); AssemblyScript strings are UTF-16. Every string crosses the boundary as
// UTF-8: encoded when the actor passes it to the host, decoded when the host returns it.
//
// Decoding is lenient, as AssemblyScript's String.UTF8.decode is: bytes that are not valid
// UTF-8 do not fail the event but do not round-trip either. Binary data goes through the
// Uint8Array variants of the API (Request.bodyBytes, storage.getBytes, ...), which never
// decode. Lone UTF-16 surrogates are encoded as WTF-8 (three bytes each), never dropped.

import { LOG_ERROR, log, result_read } from "./host";

// Logs msg at error level and traps: the event fails (its writes discarded, the caller an
// error naming the trap) and the next event gets a fresh instance. For the actor's own bugs.
export function fail(msg: string): void {
  const b = utf8(msg);
  log(LOG_ERROR, b.dataStart, <u32>b.length);
  unreachable();
}

// The UTF-8 encoding of text.
export function utf8(text: string): Uint8Array {
  return Uint8Array.wrap(String.UTF8.encode(text));
}

// Decodes UTF-8 bytes (leniently: see the top of this file).
export function fromUtf8(bytes: Uint8Array): string {
  return String.UTF8.decodeUnsafe(bytes.dataStart, <usize>bytes.byteLength);
}

// True if bytes are valid UTF-8 (RFC 3629: shortest forms only, no surrogates, nothing
// above U+10FFFF): what a WebSocket text message must hold, so bytes that fail it go out as
// a binary message.
export function isUtf8(bytes: Uint8Array): bool {
  const n = bytes.length;
  let i = 0;
  while (i < n) {
    const c = <u32>bytes[i];
    if (c < 0x80) {
      i++;
      continue;
    }
    let need = 0;
    let min: u32 = 0;
    let cp: u32 = 0;
    if (c >= 0xc2 && c <= 0xdf) {
      need = 1; min = 0x80; cp = c & 0x1f;
    } else if (c >= 0xe0 && c <= 0xef) {
      need = 2; min = 0x800; cp = c & 0x0f;
    } else if (c >= 0xf0 && c <= 0xf4) {
      need = 3; min = 0x10000; cp = c & 0x07;
    } else {
      return false;
    }
    if (i + need >= n) return false;  // cut short
    for (let k = 1; k <= need; k++) {
      const cc = <u32>bytes[i + k];
      if ((cc & 0xc0) != 0x80) return false;
      cp = (cp << 6) | (cc & 0x3f);
    }
    if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += need + 1;
  }
  return true;
}

// Copies `len` bytes of the host's result buffer into a new array; null when len < 0 (the
// host's "absent"). Call it right after the host call that filled the buffer.
export function takeResult(len: i32): Uint8Array | null {
  if (len < 0) return null;
  const out = new Uint8Array(len);
  if (len > 0) {
    const got = result_read(out.dataStart, <u32>len);
    if (got < len) return out.subarray(0, got);
  }
  return out;
}

// True if a and b hold the same bytes.
export function bytesEqual(a: Uint8Array, b: Uint8Array): bool {
  if (a.length != b.length) return false;
  return memory.compare(a.dataStart, b.dataStart, <usize>a.length) == 0;
}

// Compares a and b as unsigned byte strings, the order of storage keys: < 0, 0 or > 0.
export function compareBytes(a: Uint8Array, b: Uint8Array): i32 {
  const common = a.length < b.length ? a.length : b.length;
  const c = memory.compare(a.dataStart, b.dataStart, <usize>common);
  if (c != 0) return c;
  return a.length - b.length;
}

// The first key after every key that begins with prefix ("msg/" -> "msg0"), for range
// listings inside a prefix; empty (no upper bound) when there is none (an empty prefix, or
// one of 0xFF bytes only).
export function prefixEnd(prefix: Uint8Array): Uint8Array {
  let n = prefix.length;
  while (n > 0 && prefix[n - 1] == 0xff) n--;
  const end = prefix.slice(0, n);
  if (n > 0) end[n - 1] = end[n - 1] + 1;
  return end;
}

function hexDigit(c: u8): i32 {
  if (c >= 0x30 && c <= 0x39) return <i32>c - 0x30;  // 0-9
  if (c >= 0x61 && c <= 0x66) return <i32>c - 0x61 + 10;  // a-f
  if (c >= 0x41 && c <= 0x46) return <i32>c - 0x41 + 10;  // A-F
  return -1;
}

// Decodes %XX escapes, and '+' as a space when plusAsSpace (form-encoded query strings). A
// '%' not followed by two hex digits is kept as it is. Works on bytes: an escape may produce
// any byte, so the result is UTF-8 only if the sender encoded UTF-8.
export function urlDecodeBytes(input: Uint8Array, plusAsSpace: bool = true): Uint8Array {
  const out = new Uint8Array(input.length);
  let n = 0;
  for (let i = 0; i < input.length; i++) {
    const c = input[i];
    if (c == 0x25 /* % */ && i + 2 < input.length) {
      const hi = hexDigit(input[i + 1]);
      const lo = hexDigit(input[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out[n++] = <u8>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out[n++] = plusAsSpace && c == 0x2b /* + */ ? 0x20 : c;
  }
  return out.subarray(0, n);
}

// urlDecodeBytes for text, decoded from UTF-8.
export function urlDecode(input: string, plusAsSpace: bool = true): string {
  return fromUtf8(urlDecodeBytes(utf8(input), plusAsSpace));
}

// A parsed integer: AssemblyScript has no optional value types, so "maybe a number" is a
// nullable object.
export class ParsedInt {
  constructor(readonly value: i64) {}
}

// Parses the whole of text as a decimal i64: an optional '-' then digits ("-12", "0",
// "007"); null for anything else, including '+', spaces and values outside i64. The same
// rule as the C++ SDK's parse_int64.
export function parseInt64(text: string): ParsedInt | null {
  const len = text.length;
  if (len == 0) return null;
  const negative = text.charCodeAt(0) == 0x2d;  // '-'
  let i = negative ? 1 : 0;
  if (i == len) return null;
  // Accumulate as a negative number: its range is one larger than the positive one.
  let acc: i64 = 0;
  const limit: i64 = negative ? i64.MIN_VALUE : -i64.MAX_VALUE;
  for (; i < len; i++) {
    const c = text.charCodeAt(i);
    if (c < 0x30 || c > 0x39) return null;
    const digit = <i64>(c - 0x30);
    if (acc < (limit + digit) / 10) return null;  // acc * 10 - digit < limit
    acc = acc * 10 - digit;
  }
  return new ParsedInt(negative ? acc : -acc);
}
