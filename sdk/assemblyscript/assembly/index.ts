// The WasmKeep SDK for AssemblyScript actors, ABI v1 (docs/abi.md, docs/sdk.md).
//
//   import { Request, Response, storage, handleRequest } from "wasmkeep";
//
//   function handle(req: Request, res: Response): void {
//     const visits = storage.getInt("visits") + 1;
//     storage.putInt("visits", visits);
//     res.text(200, "visit " + visits.toString() + "\n");
//   }
//
//   export function wk_on_request(): i32 { return handleRequest(handle); }
//
// Build with scripts/build-actor.sh my_actor.ts -o my_actor.wasm. The module imports only
// the host functions of "wasmkeep_v1" (host.ts); nothing here adds a call the ABI lacks.
// One event runs at a time on one thread: nothing here is thread-safe, and nothing needs to be.

export { Request, Header } from "./request";
export { Response } from "./response";
export { storage, Storage, RawStorage, ListOptions, Entry, Cursor, DEFAULT_PAGE_ENTRIES } from "./storage";
export {
  now, random, randomBytes, randomHex, randomU64, log, Log, sync, alarm, Alarm, AlarmInfo, handleRequest, handleAlarm,
  handleUpgrade, abortEvent,
} from "./actor";
export { send, sendBytes, Message, handleMessage } from "./messages";
export {
  Socket, Sockets, sockets, SocketMessage, SocketClose, handleSocketOpen, handleSocketMessage, handleSocketClose,
  CLOSE_NORMAL, CLOSE_GOING_AWAY, CLOSE_NO_STATUS, CLOSE_ABNORMAL, CLOSE_RESTART,
} from "./sockets";
export { SOCKET_TEXT, SOCKET_BINARY } from "./host";
export { Json, JsonValue, JsonKind, JsonNull, JsonBool, JsonNumber, JsonString, JsonArray, JsonObject, JSON_MAX_DEPTH } from "./json";
export { fail, utf8, fromUtf8, isUtf8, urlDecode, urlDecodeBytes, parseInt64, ParsedInt, prefixEnd, bytesEqual, compareBytes } from "./bytes";
// The raw host functions: import * as host from "wasmkeep/assembly/host".
