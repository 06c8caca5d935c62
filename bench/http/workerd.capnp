# workerd configuration for bench/http_bench.sh: the counter Durable Object with on-disk
# storage: a template. The script replaces @PORT@, @DISK@ (an absolute directory) and @TOKEN@, and puts
# counter-do.js beside the result.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .counterWorker),
    (name = "do-disk", disk = (path = "@DISK@", writable = true)),
  ],
  sockets = [
    (name = "http", address = "127.0.0.1:@PORT@", http = (), service = "main"),
  ],
);

const counterWorker :Workerd.Worker = (
  compatibilityDate = "2024-09-23",
  modules = [
    (name = "worker", esModule = embed "counter-do.js"),
  ],
  durableObjectNamespaces = [
    (className = "Counter", uniqueKey = "wasmkeep-http-bench-counter"),
  ],
  durableObjectStorage = (localDisk = "do-disk"),
  bindings = [
    (name = "COUNTER", durableObjectNamespace = "Counter"),
    (name = "TOKEN", text = "@TOKEN@"),
  ],
);
