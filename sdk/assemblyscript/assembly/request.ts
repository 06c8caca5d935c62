// request.ts: the request of the current event (docs/abi.md "The request").
//
// The SDK makes one Request per event and hands it to the handler. Each field is read from
// the host on first use and kept for the event. Text fields are decoded from UTF-8
// (bytes.ts says how leniently); the body also comes as bytes, untouched.

import { Json, JsonValue } from "./json";
import { fromUtf8, takeResult, urlDecode, utf8 } from "./bytes";
import { REQUEST_BODY, REQUEST_HEADERS, REQUEST_METHOD, REQUEST_PATH, REQUEST_QUERY, request_get, request_header } from "./host";

// One request header: its name in lowercase and its value.
export class Header {
  constructor(readonly name: string, readonly value: string) {}
}

function fieldBytes(field: i32): Uint8Array {
  const bytes = takeResult(request_get(field));
  return bytes === null ? new Uint8Array(0) : bytes;
}

export class Request {
  private _method: string | null = null;
  private _path: string | null = null;
  private _query: string | null = null;
  private _body: Uint8Array | null = null;
  private _text: string | null = null;

  // "GET", "POST", ...
  get method(): string {
    let v = this._method;
    if (v === null) this._method = v = fromUtf8(fieldBytes(REQUEST_METHOD));
    return v;
  }

  // The part of the URL path after the actor's name: "/increment", "/" or "" (still
  // percent-encoded, as received).
  get path(): string {
    let v = this._path;
    if (v === null) this._path = v = fromUtf8(fieldBytes(REQUEST_PATH));
    return v;
  }

  // The query string without '?', still encoded ("prefix=a%2Fb&limit=10").
  get query(): string {
    let v = this._query;
    if (v === null) this._query = v = fromUtf8(fieldBytes(REQUEST_QUERY));
    return v;
  }

  // The body as bytes, exactly as received (at most actors.max_request_bytes, 1 MiB by
  // default: the node refuses a larger one before the actor runs).
  get bodyBytes(): Uint8Array {
    let v = this._body;
    if (v === null) this._body = v = fieldBytes(REQUEST_BODY);
    return v;
  }

  // The body decoded from UTF-8.
  get body(): string {
    let v = this._text;
    if (v === null) this._text = v = fromUtf8(this.bodyBytes);
    return v;
  }

  // The body parsed as JSON; null if it is not JSON (Json.lastError says why).
  json(): JsonValue | null {
    return Json.parse(this.body);
  }

  // The value of a request header (name compared case-insensitively; the first one if
  // repeated), or null.
  header(name: string): string | null {
    const key = utf8(name);
    const value = takeResult(request_header(key.dataStart, <u32>key.length));
    return value === null ? null : fromUtf8(value);
  }

  // Every header, names in lowercase, in the order the host gives them.
  headers(): Header[] {
    const all = fromUtf8(fieldBytes(REQUEST_HEADERS));
    const out: Header[] = [];
    const lines = all.split("\n");
    for (let i = 0; i < lines.length; i++) {
      const line = lines[i];
      const colon = line.indexOf(": ");
      if (colon < 0) continue;
      out.push(new Header(line.substring(0, colon), line.substring(colon + 2)));
    }
    return out;
  }

  // The first query parameter called name (names and values URL-decoded, '+' as a space);
  // "" for a name without '='; null if absent.
  queryParam(name: string): string | null {
    const parts = this.query.split("&");
    for (let i = 0; i < parts.length; i++) {
      const part = parts[i];
      if (part.length == 0) continue;
      const eq = part.indexOf("=");
      const rawName = eq < 0 ? part : part.substring(0, eq);
      if (urlDecode(rawName) != name) continue;
      return eq < 0 ? "" : urlDecode(part.substring(eq + 1));
    }
    return null;
  }
}
