// json.ts: JSON values for actors (AssemblyScript has no JSON.parse/stringify and no
// `any`). A value is a JsonValue: JsonNull, JsonBool, JsonNumber (an f64, as in
// JavaScript), JsonString, JsonArray or JsonObject (keys kept in insertion order).
//
//   const doc = Json.parse(req.body);            // null if the text is not JSON
//   if (doc === null) { res.text(400, Json.lastError + "\n"); return; }
//   const name = doc.getString("name");          // null if absent or not a string
//   const out = JsonValue.object().set("ok", JsonValue.bool(true));
//   res.json(200, out);
//
// Limits, each with its reason:
// - Nesting depth at most JSON_MAX_DEPTH (64), in parse and in stringify: the parser and the
//   writer recurse, and the wasm stack is the engine's; a deeper (or cyclic) value is an
//   error in parse and a trap in stringify, never a stack overflow deep in the engine.
// - Numbers are f64: integers are exact up to 2^53. Integral values in that range are
//   written without a fraction ("42", not "42.0"); NaN and infinities are written as null,
//   as JavaScript does.
// - Duplicate keys in parsed text: the last value wins, in the first key's position (as
//   JavaScript's JSON.parse).

import { fail } from "./bytes";

export const JSON_MAX_DEPTH: i32 = 64;

export const enum JsonKind {
  Null = 0,
  Bool = 1,
  Number = 2,
  String = 3,
  Array = 4,
  Object = 5,
}

// 2^53: above it an f64 no longer holds every integer.
const MAX_EXACT_INTEGER: f64 = 9007199254740992.0;

export class JsonValue {
  constructor(readonly kind: JsonKind) {}

  static null(): JsonNull {
    return new JsonNull();
  }
  static bool(value: bool): JsonBool {
    return new JsonBool(value);
  }
  static number(value: f64): JsonNumber {
    return new JsonNumber(value);
  }
  // An integer as a JSON number (exact while |value| <= 2^53).
  static integer(value: i64): JsonNumber {
    return new JsonNumber(<f64>value);
  }
  static string(value: string): JsonString {
    return new JsonString(value);
  }
  static array(): JsonArray {
    return new JsonArray();
  }
  static object(): JsonObject {
    return new JsonObject();
  }

  get isNull(): bool {
    return this.kind == JsonKind.Null;
  }
  get isBool(): bool {
    return this.kind == JsonKind.Bool;
  }
  get isNumber(): bool {
    return this.kind == JsonKind.Number;
  }
  get isString(): bool {
    return this.kind == JsonKind.String;
  }
  get isArray(): bool {
    return this.kind == JsonKind.Array;
  }
  get isObject(): bool {
    return this.kind == JsonKind.Object;
  }

  // Each asX returns the value as X, or null when it is of another kind.
  asBool(): JsonBool | null {
    return this.kind == JsonKind.Bool ? changetype<JsonBool>(this) : null;
  }
  asNumber(): JsonNumber | null {
    return this.kind == JsonKind.Number ? changetype<JsonNumber>(this) : null;
  }
  asString(): JsonString | null {
    return this.kind == JsonKind.String ? changetype<JsonString>(this) : null;
  }
  asArray(): JsonArray | null {
    return this.kind == JsonKind.Array ? changetype<JsonArray>(this) : null;
  }
  asObject(): JsonObject | null {
    return this.kind == JsonKind.Object ? changetype<JsonObject>(this) : null;
  }

  // Shortcuts for an object's members; null when this is not an object, the key is absent,
  // or the member is of another kind.
  get(key: string): JsonValue | null {
    const obj = this.asObject();
    return obj === null ? null : obj.member(key);
  }
  getString(key: string): string | null {
    const v = this.get(key);
    if (v === null) return null;
    const s = v.asString();
    return s === null ? null : s.value;
  }
  getNumber(key: string, fallback: f64): f64 {
    const v = this.get(key);
    if (v === null) return fallback;
    const n = v.asNumber();
    return n === null ? fallback : n.value;
  }
  getBool(key: string, fallback: bool): bool {
    const v = this.get(key);
    if (v === null) return fallback;
    const b = v.asBool();
    return b === null ? fallback : b.value;
  }

  // Deep equality: same kind and same contents (object members compared by key, in any order).
  equals(other: JsonValue): bool {
    if (this.kind != other.kind) return false;
    switch (this.kind) {
      case JsonKind.Null:
        return true;
      case JsonKind.Bool:
        return changetype<JsonBool>(this).value == changetype<JsonBool>(other).value;
      case JsonKind.Number:
        return changetype<JsonNumber>(this).value == changetype<JsonNumber>(other).value;
      case JsonKind.String:
        return changetype<JsonString>(this).value == changetype<JsonString>(other).value;
      case JsonKind.Array: {
        const a = changetype<JsonArray>(this).items;
        const b = changetype<JsonArray>(other).items;
        if (a.length != b.length) return false;
        for (let i = 0; i < a.length; i++) {
          if (!a[i].equals(b[i])) return false;
        }
        return true;
      }
      default: {
        const a = changetype<JsonObject>(this);
        const b = changetype<JsonObject>(other);
        if (a.size != b.size) return false;
        const keys = a.keys;
        for (let i = 0; i < keys.length; i++) {
          const theirs = b.member(keys[i]);
          if (theirs === null || !a.member(keys[i])!.equals(theirs)) return false;
        }
        return true;
      }
    }
  }

  // The JSON text of this value (compact: no spaces).
  toString(): string {
    return Json.stringify(this);
  }
}

export class JsonNull extends JsonValue {
  constructor() {
    super(JsonKind.Null);
  }
}

export class JsonBool extends JsonValue {
  constructor(public value: bool) {
    super(JsonKind.Bool);
  }
}

export class JsonNumber extends JsonValue {
  constructor(public value: f64) {
    super(JsonKind.Number);
  }
  // True if the number is an integer that an f64 holds exactly (|n| <= 2^53).
  get isInteger(): bool {
    return Math.floor(this.value) == this.value && Math.abs(this.value) <= MAX_EXACT_INTEGER;
  }
  // The value as an i64 (truncated toward zero; out-of-range values saturate).
  toI64(): i64 {
    return i64(this.value);
  }
}

export class JsonString extends JsonValue {
  constructor(public value: string) {
    super(JsonKind.String);
  }
}

export class JsonArray extends JsonValue {
  items: JsonValue[] = [];
  constructor() {
    super(JsonKind.Array);
  }
  get length(): i32 {
    return this.items.length;
  }
  // The item at index, or null when index is outside the array.
  at(index: i32): JsonValue | null {
    return index >= 0 && index < this.items.length ? this.items[index] : null;
  }
  push(value: JsonValue): JsonArray {
    this.items.push(value);
    return this;
  }
}

export class JsonObject extends JsonValue {
  private order: string[] = [];
  private members: Map<string, JsonValue> = new Map();
  constructor() {
    super(JsonKind.Object);
  }
  // The number of members.
  get size(): i32 {
    return this.order.length;
  }
  // The keys, in insertion order (a copy).
  get keys(): string[] {
    return this.order.slice(0);
  }
  has(key: string): bool {
    return this.members.has(key);
  }
  // The member's value, or null when absent.
  member(key: string): JsonValue | null {
    return this.members.has(key) ? this.members.get(key) : null;
  }
  // Sets a member; a new key goes last, an existing one keeps its place.
  set(key: string, value: JsonValue): JsonObject {
    if (!this.members.has(key)) this.order.push(key);
    this.members.set(key, value);
    return this;
  }
  // Removes a member; true if it was there.
  delete(key: string): bool {
    if (!this.members.has(key)) return false;
    this.members.delete(key);
    const i = this.order.indexOf(key);
    this.order.splice(i, 1);
    return true;
  }
}

// Parsing and writing.
export namespace Json {
  // Why the last parse failed ("" after a success), with the offset in UTF-16 units.
  export let lastError: string = "";

  // Parses a whole JSON text (RFC 8259; whitespace around it allowed); null when it is not
  // valid JSON, deeper than JSON_MAX_DEPTH, or followed by anything but whitespace.
  export function parse(text: string): JsonValue | null {
    const parser = new Parser(text);
    const value = parser.parseDocument();
    lastError = value === null ? parser.error : "";
    return value;
  }

  // The compact JSON text of value. A value nested deeper than JSON_MAX_DEPTH (a cycle, say)
  // traps: it is the actor's own bug.
  export function stringify(value: JsonValue): string {
    const parts: string[] = [];
    write(value, parts, 0);
    return parts.join("");
  }
}

function write(value: JsonValue, out: string[], depth: i32): void {
  if (depth > JSON_MAX_DEPTH) fail("Json.stringify: value nested deeper than 64 (a cycle?)");
  switch (value.kind) {
    case JsonKind.Null:
      out.push("null");
      break;
    case JsonKind.Bool:
      out.push(changetype<JsonBool>(value).value ? "true" : "false");
      break;
    case JsonKind.Number:
      out.push(numberText(changetype<JsonNumber>(value).value));
      break;
    case JsonKind.String:
      out.push(quote(changetype<JsonString>(value).value));
      break;
    case JsonKind.Array: {
      const items = changetype<JsonArray>(value).items;
      out.push("[");
      for (let i = 0; i < items.length; i++) {
        if (i > 0) out.push(",");
        write(items[i], out, depth + 1);
      }
      out.push("]");
      break;
    }
    default: {
      const obj = changetype<JsonObject>(value);
      const keys = obj.keys;
      out.push("{");
      for (let i = 0; i < keys.length; i++) {
        if (i > 0) out.push(",");
        out.push(quote(keys[i]));
        out.push(":");
        write(obj.member(keys[i])!, out, depth + 1);
      }
      out.push("}");
    }
  }
}

function numberText(n: f64): string {
  if (!isFinite(n)) return "null";
  if (Math.floor(n) == n && Math.abs(n) <= MAX_EXACT_INTEGER) return i64(n).toString();
  return n.toString();
}

const HEX_DIGITS = "0123456789abcdef";

function unicodeEscape(c: i32): string {
  return "\\u" + HEX_DIGITS.charAt((c >> 12) & 15) + HEX_DIGITS.charAt((c >> 8) & 15) +
    HEX_DIGITS.charAt((c >> 4) & 15) + HEX_DIGITS.charAt(c & 15);
}

// A JSON string literal for s: quotes, backslashes and control characters escaped, and lone
// surrogates as \uXXXX so the text stays valid UTF-8.
function quote(s: string): string {
  const parts: string[] = ['"'];
  let run = 0;  // start of the current run of characters that need no escape
  const len = s.length;
  for (let i = 0; i < len; i++) {
    const c = s.charCodeAt(i);
    let escape: string | null = null;
    if (c == 0x22) escape = '\\"';
    else if (c == 0x5c) escape = "\\\\";
    else if (c == 0x0a) escape = "\\n";
    else if (c == 0x0d) escape = "\\r";
    else if (c == 0x09) escape = "\\t";
    else if (c == 0x08) escape = "\\b";
    else if (c == 0x0c) escape = "\\f";
    else if (c < 0x20) escape = unicodeEscape(c);
    else if (c >= 0xd800 && c <= 0xdfff) {
      const paired = c < 0xdc00 && i + 1 < len && (s.charCodeAt(i + 1) & 0xfc00) == 0xdc00;
      if (paired) {
        i++;  // a valid pair passes through
        continue;
      }
      escape = unicodeEscape(c);
    }
    if (escape !== null) {
      if (i > run) parts.push(s.substring(run, i));
      parts.push(escape);
      run = i + 1;
    }
  }
  if (len > run) parts.push(s.substring(run, len));
  parts.push('"');
  return parts.join("");
}

class Parser {
  pos: i32 = 0;
  error: string = "";
  constructor(private text: string) {}

  parseDocument(): JsonValue | null {
    this.skipSpace();
    const value = this.parseValue(0);
    if (value === null) return null;
    this.skipSpace();
    if (this.pos < this.text.length) return this.fail("unexpected text after the value");
    return value;
  }

  private fail(why: string): JsonValue | null {
    if (this.error.length == 0) this.error = "invalid JSON at offset " + this.pos.toString() + ": " + why;
    return null;
  }

  private peek(): i32 {
    return this.pos < this.text.length ? this.text.charCodeAt(this.pos) : -1;
  }

  private skipSpace(): void {
    const len = this.text.length;
    while (this.pos < len) {
      const c = this.text.charCodeAt(this.pos);
      if (c != 0x20 && c != 0x09 && c != 0x0a && c != 0x0d) break;
      this.pos++;
    }
  }

  private literal(word: string): bool {
    if (this.text.substr(this.pos, word.length) != word) return false;
    this.pos += word.length;
    return true;
  }

  private parseValue(depth: i32): JsonValue | null {
    if (depth >= JSON_MAX_DEPTH) return this.fail("nested deeper than 64");
    const c = this.peek();
    if (c == 0x7b) return this.parseObject(depth);  // {
    if (c == 0x5b) return this.parseArray(depth);  // [
    if (c == 0x22) {  // "
      const s = this.parseString();
      return s === null ? null : new JsonString(s);
    }
    if (c == 0x2d || (c >= 0x30 && c <= 0x39)) return this.parseNumber();
    if (this.literal("true")) return new JsonBool(true);
    if (this.literal("false")) return new JsonBool(false);
    if (this.literal("null")) return new JsonNull();
    return this.fail(c < 0 ? "unexpected end" : "unexpected character");
  }

  private parseObject(depth: i32): JsonValue | null {
    this.pos++;  // {
    const obj = new JsonObject();
    this.skipSpace();
    if (this.peek() == 0x7d) {
      this.pos++;
      return obj;
    }
    for (;;) {
      this.skipSpace();
      if (this.peek() != 0x22) return this.fail("expected a string key");
      const key = this.parseString();
      if (key === null) return null;
      this.skipSpace();
      if (this.peek() != 0x3a) return this.fail("expected ':'");
      this.pos++;
      this.skipSpace();
      const value = this.parseValue(depth + 1);
      if (value === null) return null;
      obj.set(key, value);
      this.skipSpace();
      const c = this.peek();
      this.pos++;
      if (c == 0x7d) return obj;  // }
      if (c != 0x2c) {  // ,
        this.pos--;
        return this.fail("expected ',' or '}'");
      }
    }
    return null;  // not reached: the loop only returns
  }

  private parseArray(depth: i32): JsonValue | null {
    this.pos++;  // [
    const arr = new JsonArray();
    this.skipSpace();
    if (this.peek() == 0x5d) {
      this.pos++;
      return arr;
    }
    for (;;) {
      this.skipSpace();
      const value = this.parseValue(depth + 1);
      if (value === null) return null;
      arr.push(value);
      this.skipSpace();
      const c = this.peek();
      this.pos++;
      if (c == 0x5d) return arr;  // ]
      if (c != 0x2c) {
        this.pos--;
        return this.fail("expected ',' or ']'");
      }
    }
    return null;  // not reached: the loop only returns
  }

  // The JSON grammar's number, checked here; its value from parseFloat of the same text.
  private parseNumber(): JsonValue | null {
    const start = this.pos;
    if (this.peek() == 0x2d) this.pos++;
    const first = this.peek();
    if (first == 0x30) {
      this.pos++;
    } else if (first >= 0x31 && first <= 0x39) {
      this.digits();
    } else {
      return this.fail("expected a digit");
    }
    if (this.peek() == 0x2e) {  // .
      this.pos++;
      if (this.digits() == 0) return this.fail("expected a digit after '.'");
    }
    const e = this.peek();
    if (e == 0x65 || e == 0x45) {  // e E
      this.pos++;
      const sign = this.peek();
      if (sign == 0x2b || sign == 0x2d) this.pos++;
      if (this.digits() == 0) return this.fail("expected a digit in the exponent");
    }
    return new JsonNumber(parseFloat(this.text.substring(start, this.pos)));
  }

  private digits(): i32 {
    const start = this.pos;
    while (this.pos < this.text.length) {
      const c = this.text.charCodeAt(this.pos);
      if (c < 0x30 || c > 0x39) break;
      this.pos++;
    }
    return this.pos - start;
  }

  private hex4(): i32 {
    if (this.pos + 4 > this.text.length) return -1;
    let v = 0;
    for (let i = 0; i < 4; i++) {
      const c = this.text.charCodeAt(this.pos + i);
      let d = -1;
      if (c >= 0x30 && c <= 0x39) d = c - 0x30;
      else if (c >= 0x61 && c <= 0x66) d = c - 0x61 + 10;
      else if (c >= 0x41 && c <= 0x46) d = c - 0x41 + 10;
      if (d < 0) return -1;
      v = v * 16 + d;
    }
    this.pos += 4;
    return v;
  }

  // A string literal at pos (which holds '"'); its value, or null after fail().
  private parseString(): string | null {
    this.pos++;  // "
    const parts: string[] = [];
    let run = this.pos;
    const len = this.text.length;
    while (this.pos < len) {
      const c = this.text.charCodeAt(this.pos);
      if (c == 0x22) {
        if (this.pos > run) parts.push(this.text.substring(run, this.pos));
        this.pos++;
        return parts.join("");
      }
      if (c < 0x20) {
        this.fail("control character in a string");
        return null;
      }
      if (c != 0x5c) {
        this.pos++;
        continue;
      }
      if (this.pos > run) parts.push(this.text.substring(run, this.pos));
      this.pos++;  // backslash
      const e = this.peek();
      this.pos++;
      if (e == 0x22) parts.push('"');
      else if (e == 0x5c) parts.push("\\");
      else if (e == 0x2f) parts.push("/");
      else if (e == 0x62) parts.push("\b");
      else if (e == 0x66) parts.push("\f");
      else if (e == 0x6e) parts.push("\n");
      else if (e == 0x72) parts.push("\r");
      else if (e == 0x74) parts.push("\t");
      else if (e == 0x75) {  // u: one UTF-16 unit; a pair arrives as two escapes
        const unit = this.hex4();
        if (unit < 0) {
          this.fail("bad \\u escape");
          return null;
        }
        parts.push(String.fromCharCode(unit));
      } else {
        this.pos--;
        this.fail("bad escape");
        return null;
      }
      run = this.pos;
    }
    this.fail("unterminated string");
    return null;
  }
}
