# workerd configuration for bench/ws_bench.sh: the chat room Durable Object (chat-do.js)
# with on-disk storage, in the style of bench/http/workerd.capnp: a template. The script
# replaces @PORT@, @DISK@ (an absolute directory) and @TOKEN@, and puts chat-do.js beside
# the result.
#
# The hibernation API (ctx.acceptWebSocket, ctx.getWebSockets, the webSocketMessage and
# webSocketClose handlers) needs no compatibility flag and no minimum date in workerd (its
# list of compatibility flags has none for it), so the date is the HTTP bench's. Two
# WebSocket flags do change with the date, and are off at this one: permessage-deflate is
# offered from 2023-08-15 but used only when the client asks for it (bench/ws_load.cc does
# not), and web_socket_auto_reply_to_close (2026-04-07) would answer a client's close
# without the object: chat-do.js answers it in webSocketClose instead.
using Workerd = import "/workerd/workerd.capnp";

const config :Workerd.Config = (
  services = [
    (name = "main", worker = .chatWorker),
    (name = "do-disk", disk = (path = "@DISK@", writable = true)),
  ],
  sockets = [
    (name = "http", address = "127.0.0.1:@PORT@", http = (), service = "main"),
  ],
);

const chatWorker :Workerd.Worker = (
  compatibilityDate = "2024-09-23",
  modules = [
    (name = "worker", esModule = embed "chat-do.js"),
  ],
  durableObjectNamespaces = [
    (className = "ChatRoom", uniqueKey = "wasmkeep-ws-bench-chat"),
  ],
  durableObjectStorage = (localDisk = "do-disk"),
  bindings = [
    (name = "CHAT", durableObjectNamespace = "ChatRoom"),
    (name = "TOKEN", text = "@TOKEN@"),
  ],
);
