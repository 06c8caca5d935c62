// docstore: a JSON document store per actor, with simple queries over document ids. What
// TypeScript users expect from a store: JSON in, JSON out, partial updates, paging.
//
//   PUT    /docs/<id>   stores the body, a JSON object, as document <id>: 201 when new, 200
//                       when replaced, with {"id": ...}
//   POST   /docs        stores the body under a new random id: 201, {"id": ...} and Location
//   GET    /docs/<id>   the document (404 if absent)
//   PATCH  /docs/<id>   merges the body (a JSON object) into the document, as a JSON merge
//                       patch: members replace, null removes, objects merge; 200 with the result
//   DELETE /docs/<id>   removes it: 204 (404 if absent)
//   GET    /docs?prefix=&start=&end=&after=&limit=&reverse=&where=&equals=
//                       {"docs": [{"id": ..., "doc": {...}}, ...], "next": <id or null>}:
//                       documents in id order (descending with reverse=true) whose id has the
//                       prefix, is >= start and < end, comes after `after` (the previous
//                       page's "next"); at most `limit` (default 20, at most 100); with
//                       where=<member>, only those whose top-level member equals `equals`
//                       (read as JSON if it parses, else as a string: equals=3, equals=true,
//                       equals=ann)
//   GET    /count?prefix=   {"count": N}, the documents whose id has the prefix
//
// Ids are the path after /docs/, URL-decoded: 1 to MAX_ID_BYTES bytes of UTF-8. A document
// is stored as its JSON text under "doc/<id>"; listing reads the storage a page at a time
// (storage.cursor), so memory stays bounded whatever the number of documents, and every
// scan is bounded too (MAX_SCANNED_PER_QUERY, MAX_COUNTED), so one request stays well
// inside the node's CPU limit per event (actors.max_event_cpu_ms, 1 s by default).
import {
  Request, Response, storage, handleRequest, Json, JsonValue, JsonObject, JsonArray, ListOptions, randomHex, urlDecode,
  utf8, compareBytes, log, parseInt64,
} from "wasmkeep";

const DOC_PREFIX = "doc/";
// An id fits a storage key (actors.max_key_bytes, 2048 by default) with room to spare.
const MAX_ID_BYTES = 512;
// A document is one value: at most actors.max_value_bytes (128 KiB by default).
const MAX_DOC_BYTES = 131072;
const DEFAULT_PAGE_DOCS = 20;
const MAX_PAGE_DOCS = 100;
// Documents a filtered query reads at most before it answers with a "next" to go on from.
const MAX_SCANNED_PER_QUERY = 1000;
// Documents /count counts at most (the answer then says "at_least": true).
const MAX_COUNTED = 100000;
// Random bytes in a generated id: 16 hex digits, 64 bits.
const GENERATED_ID_BYTES = 8;

function error(res: Response, status: i32, message: string): void {
  res.json(status, JsonValue.object().set("error", JsonValue.string(message)));
}

// The body as a JSON object, or null after answering 400.
function bodyObject(req: Request, res: Response): JsonObject | null {
  if (req.bodyBytes.length > MAX_DOC_BYTES) {
    error(res, 413, "a document is at most 131072 bytes");
    return null;
  }
  const value = req.json();
  if (value === null) {
    error(res, 400, Json.lastError);
    return null;
  }
  const obj = value.asObject();
  if (obj === null) error(res, 400, "a document is a JSON object");
  return obj;
}

// RFC 7386 merge patch: patch's members replace target's, null removes, objects merge.
function mergePatch(target: JsonObject, patch: JsonObject): void {
  const keys = patch.keys;
  for (let i = 0; i < keys.length; i++) {
    const key = keys[i];
    const value = patch.member(key)!;
    if (value.isNull) {
      target.delete(key);
      continue;
    }
    const patchObj = value.asObject();
    const existing = target.member(key);
    if (patchObj !== null && existing !== null && existing.isObject) {
      mergePatch(existing.asObject()!, patchObj);
    } else if (patchObj !== null) {
      const fresh = JsonValue.object();
      mergePatch(fresh, patchObj);
      target.set(key, fresh);
    } else {
      target.set(key, value);
    }
  }
}

function putDoc(id: string, doc: JsonObject): void {
  const text = doc.toString();
  storage.put(DOC_PREFIX + id, text);
}

function idAnswer(id: string): JsonObject {
  return JsonValue.object().set("id", JsonValue.string(id));
}

function handleDoc(req: Request, res: Response, id: string): void {
  const method = req.method;
  const key = DOC_PREFIX + id;
  if (method == "GET") {
    const doc = storage.getJSON(key);
    if (doc === null) return error(res, 404, "no such document");
    res.json(200, doc);
  } else if (method == "PUT") {
    const doc = bodyObject(req, res);
    if (doc === null) return;
    const existed = storage.has(key);
    putDoc(id, doc);
    res.json(existed ? 200 : 201, idAnswer(id));
  } else if (method == "PATCH") {
    const patch = bodyObject(req, res);
    if (patch === null) return;
    const stored = storage.getJSON(key);
    if (stored === null) return error(res, 404, "no such document");
    const doc = stored.asObject()!;
    mergePatch(doc, patch);
    putDoc(id, doc);
    res.json(200, doc);
  } else if (method == "DELETE") {
    if (!storage.delete(key)) return error(res, 404, "no such document");
    res.status(204);
  } else {
    res.header("Allow", "GET, PUT, PATCH, DELETE");
    error(res, 405, "method not allowed");
  }
}

// A query parameter as a whole number in [min, max], fallback when absent; -1 after
// answering 400.
function intParam(req: Request, res: Response, name: string, fallback: i32, min: i32, max: i32): i32 {
  const text = req.queryParam(name);
  if (text === null) return fallback;
  const parsed = parseInt64(text);
  if (parsed === null || parsed.value < <i64>min || parsed.value > <i64>max) {
    error(res, 400, name + " must be a whole number from " + min.toString() + " to " + max.toString());
    return -1;
  }
  return <i32>parsed.value;
}

function query(req: Request, res: Response): void {
  const limit = intParam(req, res, "limit", DEFAULT_PAGE_DOCS, 1, MAX_PAGE_DOCS);
  if (limit < 0) return;
  const reverseText = req.queryParam("reverse");
  const reverse = reverseText !== null && (reverseText == "true" || reverseText == "1");
  const where = req.queryParam("where");
  const equalsText = req.queryParam("equals");
  let equals: JsonValue | null = null;
  if (where !== null) {
    if (equalsText === null) return error(res, 400, "where needs equals");
    equals = Json.parse(equalsText);
    if (equals === null) equals = JsonValue.string(equalsText);
  }

  const prefix = req.queryParam("prefix");
  const start = req.queryParam("start");
  const end = req.queryParam("end");
  const after = req.queryParam("after");
  const options = new ListOptions();
  options.prefix = DOC_PREFIX + (prefix === null ? "" : prefix);
  options.reverse = reverse;
  let low = utf8(DOC_PREFIX + (start === null ? "" : start));
  let high = end === null ? new Uint8Array(0) : utf8(DOC_PREFIX + end);
  if (after !== null) {
    const afterKey = utf8(DOC_PREFIX + after);
    if (reverse) {
      if (high.length == 0 || compareBytes(afterKey, high) < 0) high = afterKey;  // ids before `after`
    } else {
      const next = new Uint8Array(afterKey.length + 1);  // the smallest id after `after`
      next.set(afterKey);
      if (compareBytes(next, low) > 0) low = next;
    }
  }
  options.startBytes = low;
  options.endBytes = high;

  // One page more than asked for with no filter tells whether there is a next page.
  const cursor = storage.cursor(options, where === null ? limit + 1 : 64);
  const docs = JsonValue.array();
  let scanned = 0;
  let lastId: string | null = null;
  let more = false;
  for (let e = cursor.next(); e !== null; e = cursor.next()) {
    if (docs.length == limit || scanned == MAX_SCANNED_PER_QUERY) {
      more = true;
      break;
    }
    scanned++;
    const id = e.key.substring(DOC_PREFIX.length);
    lastId = id;
    const doc = Json.parse(e.value);
    if (doc === null) {
      log.error("docstore: document " + id + " is not JSON: " + Json.lastError);
      continue;
    }
    if (where !== null) {
      const member = doc.get(where);
      if (member === null || !member.equals(equals!)) continue;
    }
    docs.push(JsonValue.object().set("id", JsonValue.string(id)).set("doc", doc));
  }
  const answer = JsonValue.object().set("docs", docs);
  answer.set("next", more && lastId !== null ? JsonValue.string(lastId) : JsonValue.null());
  res.json(200, answer);
}

function count(req: Request, res: Response): void {
  const prefix = req.queryParam("prefix");
  const options = new ListOptions();
  options.prefix = DOC_PREFIX + (prefix === null ? "" : prefix);
  options.limit = MAX_COUNTED + 1;
  const cursor = storage.cursor(options, 256);
  let n = 0;
  while (cursor.next() !== null) n++;
  const answer = JsonValue.object().set("count", JsonValue.integer(n > MAX_COUNTED ? MAX_COUNTED : n));
  if (n > MAX_COUNTED) answer.set("at_least", JsonValue.bool(true));
  res.json(200, answer);
}

function handle(req: Request, res: Response): void {
  const path = req.path;
  if (path == "/docs") {
    const method = req.method;
    if (method == "GET") return query(req, res);
    if (method == "POST") {
      const doc = bodyObject(req, res);
      if (doc === null) return;
      const id = randomHex(GENERATED_ID_BYTES);
      putDoc(id, doc);
      res.header("Location", "docs/" + id);
      res.json(201, idAnswer(id));
      return;
    }
    res.header("Allow", "GET, POST");
    return error(res, 405, "method not allowed");
  }
  if (path.startsWith("/docs/")) {
    const id = urlDecode(path.substring(6), false);
    const bytes = utf8(id).length;
    if (bytes == 0 || bytes > MAX_ID_BYTES) return error(res, 400, "an id is 1 to 512 bytes");
    return handleDoc(req, res, id);
  }
  if (path == "/count") {
    if (req.method != "GET") {
      res.header("Allow", "GET");
      return error(res, 405, "method not allowed");
    }
    return count(req, res);
  }
  error(res, 404, "use /docs, /docs/<id> or /count");
}

export function wk_on_request(): i32 {
  return handleRequest(handle);
}
