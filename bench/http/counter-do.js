// The counter of examples/counter/counter.cc as a Cloudflare Durable Object, for
// bench/http_bench.sh: the same URLs, the same answers.
//
//   POST /v1/actors/<tenant>/counter/<name>/increment  adds 1, answers the new value ("3\n")
//   GET  /v1/actors/<tenant>/counter/<name>            answers the current value
//
// The stateless worker checks the bearer token (as a WasmKeep node checks the tenant's) and
// routes to the object idFromName("<tenant>/<name>"). The object keeps the value under one
// key, "count", in its storage: with durableObjectStorage = (localDisk = ...) that is one
// SQLite database per object on disk. The put is not awaited, as Durable Objects are
// written: the output gate holds the response until the write is committed to disk.

// Objects constructed so far in this isolate (the objects of one namespace share the
// worker's isolate in workerd): bench/density_bench.sh reads it at GET /_density to tell
// how many objects workerd evicted and made again.
let constructed = 0;

export class Counter {
  constructor(state, env) {
    this.state = state;
    constructed++;
  }

  async fetch(request) {
    const path = new URL(request.url).pathname;
    if (request.method === "GET") {
      const count = (await this.state.storage.get("count")) ?? 0;
      return new Response(`${count}\n`);
    }
    if (request.method === "POST") {
      if (!path.endsWith("/increment")) {
        return new Response("POST /increment adds one; GET shows the count\n", { status: 404 });
      }
      const count = ((await this.state.storage.get("count")) ?? 0) + 1;
      this.state.storage.put("count", count);
      return new Response(`${count}\n`);
    }
    return new Response("method not allowed: use GET or POST /increment\n",
                        { status: 405, headers: { Allow: "GET, POST" } });
  }
}

const ROUTE = /^\/v1\/actors\/([a-z0-9][a-z0-9_-]*)\/counter\/([A-Za-z0-9._~-]+)(\/.*)?$/;

export default {
  async fetch(request, env) {
    if (request.headers.get("Authorization") !== `Bearer ${env.TOKEN}`) {
      return new Response("unauthorized\n", { status: 401 });
    }
    if (new URL(request.url).pathname === "/_density") return new Response(`${constructed}\n`);
    const m = ROUTE.exec(new URL(request.url).pathname);
    if (!m) return new Response("not found\n", { status: 404 });
    const stub = env.COUNTER.get(env.COUNTER.idFromName(`${m[1]}/${m[2]}`));
    return stub.fetch(request);
  },
};
