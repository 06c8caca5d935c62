# workerd configuration for bench/alarms_bench.sh: the alarm probe Durable Object with
# on-disk storage (one SQLite database per object). A template: the script replaces @PORT@,
# @DISK@ (an absolute directory) and @TOKEN@, and puts alarm-do.js beside the result.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .probeWorker),
    (name = "do-disk", disk = (path = "@DISK@", writable = true)),
  ],
  sockets = [
    (name = "http", address = "127.0.0.1:@PORT@", http = (), service = "main"),
  ],
);

const probeWorker :Workerd.Worker = (
  compatibilityDate = "2024-09-23",
  modules = [
    (name = "worker", esModule = embed "alarm-do.js"),
  ],
  durableObjectNamespaces = [
    (className = "Probe", uniqueKey = "wasmkeep-alarms-bench-probe"),
  ],
  durableObjectStorage = (localDisk = "do-disk"),
  bindings = [
    (name = "PROBE", durableObjectNamespace = "Probe"),
    (name = "TOKEN", text = "@TOKEN@"),
  ],
);
