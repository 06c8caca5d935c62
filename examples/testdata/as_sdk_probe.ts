// A test actor for the AssemblyScript SDK (sdk/assemblyscript/): each path drives one part
// of the SDK through the real runtime, and examples/examples_test.cc checks the answers.
// Not an example.
//
//   POST /json            parses the body: 200 with Json.stringify of it, or 400 with Json.lastError
//   POST /echo            the body's bytes back, and X-Method, X-Path, X-Query, X-Foo (header
//                         x-foo, or "(none)") and X-Body-Chars (the decoded body's length)
//   GET  /param?name=N&.. the query parameter N, or "(absent)"
//   GET  /headers         every request header as "name=value\n"
//   PUT  /kv/<key>        storage.putBytes(key, body); GET /kv/<key>: getBytes or 404
//   PUT  /raw             stores the body under the byte key 0xff 0x00 0x01 (storage.raw)
//   GET  /raw             that value, or 404
//   GET  /list?...        storage.list: the keys one per line (prefix, start, end, limit, reverse)
//   GET  /cursor?...      the same through storage.cursor with page=N entries per host call
//   GET  /int/<key>       storage.getInt(key, -1): traps when the stored value is not a number
//   GET  /json/<key>      storage.getJSON(key): traps when the stored value is not JSON
//   POST /alarm?at=T      alarm.set(T); GET /alarm: alarm.get(); DELETE /alarm: alarm.delete()
//   GET  /random?n=N      randomBytes(N).length, randomHex(4), random() in [0, 1)
//   GET  /now             now()
//   GET  /sync            sync() as "true"/"false"
//   GET  /throw           throws: the event fails, its writes discarded
//   GET  /bounds          reads past an array's end: the event fails
//   GET  /alarms-fired    how many times wk_on_alarm ran (stored under "alarms"), and the
//                         last run's AlarmInfo: "<n> retry <retryCount> <isRetry>"
//   GET  /memory          the linear memory's size in 64 KiB pages
import {
  Request, Response, storage, handleRequest, handleAlarm, AlarmInfo, Json, ListOptions, alarm, now, random,
  randomBytes, randomHex, sync, log, parseInt64,
} from "wasmkeep";

function param(req: Request, name: string, fallback: string): string {
  const v = req.queryParam(name);
  return v === null ? fallback : v;
}

function intParam(req: Request, name: string, fallback: i64): i64 {
  const v = req.queryParam(name);
  if (v === null) return fallback;
  const n = parseInt64(v);
  return n === null ? fallback : n.value;
}

function listOptions(req: Request): ListOptions {
  const o = new ListOptions();
  o.prefix = param(req, "prefix", "");
  o.start = param(req, "start", "");
  o.end = param(req, "end", "");
  o.limit = <i32>intParam(req, "limit", 0);
  o.reverse = param(req, "reverse", "") == "1";
  return o;
}

function handle(req: Request, res: Response): void {
  const method = req.method;
  const path = req.path;
  if (path == "/json" && method == "POST") {
    const v = req.json();
    if (v === null) {
      res.text(400, Json.lastError);
      return;
    }
    res.text(200, Json.stringify(v));
  } else if (path == "/echo") {
    const foo = req.header("X-Foo");
    res.header("X-Method", method).header("X-Path", path).header("X-Query", req.query);
    res.header("X-Foo", foo === null ? "(none)" : foo);
    res.header("X-Body-Chars", req.body.length.toString());
    res.writeBytes(req.bodyBytes);
  } else if (path == "/param") {
    const v = req.queryParam(param(req, "name", ""));
    res.text(200, v === null ? "(absent)" : v);
  } else if (path == "/headers") {
    const all = req.headers();
    let out = "";
    for (let i = 0; i < all.length; i++) out += all[i].name + "=" + all[i].value + "\n";
    res.text(200, out);
  } else if (path.startsWith("/kv/")) {
    const key = path.substring(4);
    if (method == "PUT") {
      storage.putBytes(key, req.bodyBytes);
      res.status(204);
    } else {
      const v = storage.getBytes(key);
      if (v === null) res.text(404, "absent");
      else res.writeBytes(v);
    }
  } else if (path == "/raw") {
    const key = new Uint8Array(3);
    key[0] = 0xff;
    key[1] = 0x00;
    key[2] = 0x01;
    if (method == "PUT") {
      storage.raw.put(key, req.bodyBytes);
      res.status(204);
    } else {
      const v = storage.raw.get(key);
      if (v === null) res.text(404, "absent");
      else res.writeBytes(v);
    }
  } else if (path == "/list") {
    const entries = storage.list(listOptions(req));
    let out = "";
    for (let i = 0; i < entries.length; i++) out += entries[i].key + "\n";
    res.text(200, out);
  } else if (path == "/cursor") {
    const cursor = storage.cursor(listOptions(req), <i32>intParam(req, "page", 2));
    let out = "";
    for (let e = cursor.next(); e !== null; e = cursor.next()) out += e.key + "=" + e.value.length.toString() + "\n";
    res.text(200, out);
  } else if (path.startsWith("/int/")) {
    res.text(200, storage.getInt(path.substring(5), -1).toString());
  } else if (path.startsWith("/json/")) {
    const v = storage.getJSON(path.substring(6));
    res.text(200, v === null ? "(absent)" : v.toString());
  } else if (path == "/alarm") {
    if (method == "POST") alarm.set(intParam(req, "at", 0));
    else if (method == "DELETE") alarm.delete();
    res.text(200, alarm.get().toString() + (alarm.isSet ? " set" : " unset"));
  } else if (path == "/random") {
    const n = <i32>intParam(req, "n", 16);
    const r = random();
    res.text(200, randomBytes(n).length.toString() + " " + randomHex(4) + " " + (r >= 0 && r < 1 ? "ok" : "bad"));
  } else if (path == "/now") {
    res.text(200, now().toString());
  } else if (path == "/sync") {
    storage.put("synced", "yes");
    res.text(200, sync() ? "true" : "false");
  } else if (path == "/throw") {
    storage.put("thrown", "yes");
    throw new Error("probe threw");
  } else if (path == "/bounds") {
    storage.put("bounds", "yes");
    const a = new Array<i32>(2);
    res.text(200, a[<i32>intParam(req, "i", 5)].toString());
  } else if (path == "/memory") {
    res.text(200, memory.size().toString());
  } else if (path == "/alarms-fired") {
    const info = storage.get("alarm-info");
    res.text(200, storage.getInt("alarms").toString() + " retry " + (info !== null ? info : "none"));
  } else {
    log.warn("as_sdk_probe: no probe at " + path);
    res.text(404, "no such probe");
  }
}

function onAlarm(info: AlarmInfo): void {
  storage.putInt("alarms", storage.getInt("alarms") + 1);
  storage.put("alarm-info", info.retryCount.toString() + " " + (info.isRetry ? "true" : "false"));
}

export function wk_on_request(): i32 {
  return handleRequest(handle);
}

export function wk_on_alarm(): i32 {
  return handleAlarm(onAlarm);
}
