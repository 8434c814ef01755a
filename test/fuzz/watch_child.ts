/**
 * Child process of load_shapes.test.ts: opens `streams` Watch streams with `perStream` watchers
 * each on `endpoint`, prints "ready N" once N created responses arrived, then waits to be killed
 * (SIGKILL: the server sees the connection die with every watcher still registered).
 * Usage: node --import tsx test/fuzz/watch_child.ts ENDPOINT STREAMS PER_STREAM
 */
import * as grpc from "@grpc/grpc-js";
import { clients } from "../e2e/grpc_client.js";

const [endpoint, streamsArg, perStreamArg] = process.argv.slice(2);
const streams = Number(streamsArg);
const perStream = Number(perStreamArg);
if (endpoint === undefined || !(streams > 0) || !(perStream > 0)) throw new Error("usage: watch_child.ts ENDPOINT STREAMS PER_STREAM");

const c = clients(endpoint);
let created = 0;
const want = streams * perStream;
for (let s = 0; s < streams; s++) {
  const call = (c.watch as unknown as { Watch(md: grpc.Metadata): grpc.ClientDuplexStream<object, { created: boolean }> }).Watch(new grpc.Metadata());
  call.on("data", (r) => {
    if (r.created && ++created === want) process.stdout.write(`ready ${created}\n`);
  });
  call.on("error", () => undefined);
  for (let w = 0; w < perStream; w++) {
    call.write({ create_request: { key: Buffer.from(`fz-watch/${s}/${w}`), range_end: Buffer.from(`fz-watch/${s}/${w}\xff`, "latin1") } });
  }
}
setInterval(() => undefined, 60_000);
