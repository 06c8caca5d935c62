// The alarm actor of bench/alarms_bench.sh as a Cloudflare Durable Object: the same URLs and
// the same log as examples/testdata/alarm_probe.cc, so the bench reads both alike.
//
//   POST /v1/actors/<tenant>/probe/<name>/set?t=<ms>&rearm=<ms>&count=<k>
//        sets the object's alarm to t (logs s<t>); each run of the alarm handler logs
//        f<t>:<retry>:<now> and re-arms it rearm ms after it ran, k times
//   GET  /v1/actors/<tenant>/probe/<name>   the log, comma-separated
//
// The log and the settings are in the object's storage (with localDisk, one SQLite database
// per object); the alarm is the object's one storage alarm (setAlarm), which workerd keeps
// and fires itself. Writes are not awaited: the output gate holds the answer (and an alarm
// handler's completion) until they are on disk, as Durable Objects are written.

export class Probe {
  constructor(state) {
    this.storage = state.storage;
  }

  async log(op) {
    const log = (await this.storage.get("log")) ?? "";
    this.storage.put("log", log === "" ? op : `${log},${op}`);
  }

  async fetch(request) {
    const url = new URL(request.url);
    if (request.method === "GET") {
      return new Response((await this.storage.get("log")) ?? "");
    }
    if (request.method === "POST" && url.pathname.endsWith("/set")) {
      const t = Number(url.searchParams.get("t") ?? "0");
      const rearm = Number(url.searchParams.get("rearm") ?? "0");
      const count = Number(url.searchParams.get("count") ?? "0");
      this.storage.setAlarm(t);
      this.storage.put({ armed: t, rearm, count: count > 0 ? count : 1 });
      await this.log(`s${t}`);
      return new Response("set\n");
    }
    return new Response("GET, POST /set?t=<ms>\n", { status: 404 });
  }

  async alarm(info) {
    const now = Date.now();
    const armed = (await this.storage.get("armed")) ?? -1;
    await this.log(`f${armed}:${info?.retryCount ?? 0}:${now}`);
    const rearm = (await this.storage.get("rearm")) ?? 0;
    const left = (await this.storage.get("count")) ?? 1;
    if (rearm > 0 && left > 0) {
      const next = now + rearm;
      this.storage.put({ count: left - 1, armed: next });
      this.storage.setAlarm(next);
      await this.log(`s${next}`);
    }
  }
}

const ROUTE = /^\/v1\/actors\/([a-z0-9][a-z0-9_-]*)\/probe\/([A-Za-z0-9._~-]+)(\/.*)?$/;

export default {
  async fetch(request, env) {
    if (request.headers.get("Authorization") !== `Bearer ${env.TOKEN}`) {
      return new Response("unauthorized\n", { status: 401 });
    }
    const m = ROUTE.exec(new URL(request.url).pathname);
    if (!m) return new Response("not found\n", { status: 404 });
    const stub = env.PROBE.get(env.PROBE.idFromName(`${m[1]}/${m[2]}`));
    return stub.fetch(request);
  },
};
