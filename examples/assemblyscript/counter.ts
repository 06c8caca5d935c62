// counter: a durable counter per actor; the AssemblyScript twin of examples/counter/counter.cc,
// with the same HTTP behaviour (examples/examples_test.cc runs the same tests on both).
//
//   POST /increment  adds 1 and answers the new value ("3\n")
//   GET  (any path)  answers the current value ("0\n" before the first increment)
//   anything else    405 (other methods) or 404 (POST to another path)
//
// The value lives under one key as decimal text. The read and the write of one increment
// are in one event's atomic batch, and the node runs one event of an actor at a time, so
// concurrent increments never lose an update.
import { Request, Response, storage, handleRequest } from "wasmkeep";

const COUNT_KEY = "count";

function handle(req: Request, res: Response): void {
  const method = req.method;
  if (method == "GET") {
    res.text(200, storage.getInt(COUNT_KEY).toString() + "\n");
    return;
  }
  if (method == "POST") {
    if (req.path != "/increment") {
      res.text(404, "POST /increment adds one; GET shows the count\n");
      return;
    }
    const count = storage.getInt(COUNT_KEY) + 1;
    storage.putInt(COUNT_KEY, count);
    res.text(200, count.toString() + "\n");
    return;
  }
  res.header("Allow", "GET, POST");
  res.text(405, "method not allowed: use GET or POST /increment\n");
}

export function wk_on_request(): i32 {
  return handleRequest(handle);
}
