/**
 * One load-driver worker: opens its share of connections (one grpc-js channel
 * each, no subchannel sharing) and runs its share of clients, each a loop of
 * one unary request at a time. The "h2" driver replaces grpc-js with bare
 * node:http2 requests, the "raw" driver with raw HTTP/2 frames (lighter
 * clients, to find the server's own limit).
 */

import http2 from "node:http2";
import { parentPort, workerData } from "node:worker_threads";
import * as grpc from "@grpc/grpc-js";
import { LatencyHistogram } from "./histogram.js";
import { RawGrpcConnection } from "./raw-grpc-client.js";
import type { WorkerCommand, WorkerReport, WorkerSetup } from "./load.js";

const setup = workerData as WorkerSetup;
const request = Buffer.from(setup.request);
const serialize = (): Buffer => request;
const deserialize = (b: Buffer): Buffer => b;

let measuring = false;
let stopped = false;
let paused = false;
/** Clients parked by pause(), restarted by resume(). */
const parked: (() => void)[] = [];
let requests = 0;
let errors = 0;
let firstError: string | undefined;
let latency = new LatencyHistogram();

/** Issues one unary call on a connection and calls back with an error description or undefined. */
type Caller = (done: (error: string | undefined) => void) => void;

function grpcJsCaller(client: grpc.Client): Caller {
  return (done) =>
    client.makeUnaryRequest(setup.path, serialize, deserialize, request, (err) => done(err ? `${err.code} ${err.details}` : undefined));
}

const framed = Buffer.alloc(5 + request.length);
framed.writeUInt32BE(request.length, 1);
request.copy(framed, 5);
const H2_HEADERS = { ":method": "POST", ":path": setup.path, "content-type": "application/grpc", te: "trailers" };

function splitTarget(target: string): [string, number] {
  const colon = target.lastIndexOf(":");
  return [target.slice(0, colon), Number(target.slice(colon + 1))];
}

function h2Caller(session: http2.ClientHttp2Session): Caller {
  return (done) => {
    const req = session.request(H2_HEADERS);
    let status: string | undefined;
    req.on("response", (h) => (status = h["grpc-status"] as string | undefined));
    req.on("trailers", (t) => (status = t["grpc-status"] as string | undefined));
    req.on("data", () => {});
    req.on("error", () => {});
    req.on("close", () => done(status === "0" ? undefined : `grpc-status ${status ?? "missing"} rst ${req.rstCode}`));
    req.end(framed);
  };
}

const raws: RawGrpcConnection[] = [];
const channels: grpc.Client[] = [];
const sessions: http2.ClientHttp2Session[] = [];
const callers: Caller[] = [];
for (let i = 0; i < setup.connections && setup.driver === "h2"; i++) {
  const session = http2.connect(`http://${setup.target}`);
  session.on("error", () => {});
  sessions.push(session);
  callers.push(h2Caller(session));
}
for (let i = 0; i < setup.connections && setup.driver === "raw"; i++) {
  const [host, port] = splitTarget(setup.target);
  const connection = new RawGrpcConnection(host, port, setup.path, framed);
  raws.push(connection);
  callers.push((done) => connection.call(done));
}
for (let i = 0; i < setup.connections && setup.driver === "grpc-js"; i++) {
  channels.push(
    new grpc.Client(setup.target, grpc.credentials.createInsecure(), {
      "grpc.use_local_subchannel_pool": 1,
      "grpc.max_receive_message_length": -1,
      // The driver must stay light: no retry buffering, no channelz bookkeeping.
      "grpc.enable_retries": 0,
      "grpc.enable_channelz": 0,
    }),
  );
  callers.push(grpcJsCaller(channels[i]!));
}

function runClient(call: Caller, onFirst: () => void): void {
  let first = true;
  const issue = (): void => {
    if (stopped) return;
    if (paused) {
      parked.push(issue);
      return;
    }
    const t0 = performance.now();
    call((err) => {
      if (first) {
        first = false;
        onFirst();
      }
      if (measuring) {
        if (err) {
          errors++;
          firstError ??= err;
        } else {
          requests++;
          latency.record((performance.now() - t0) * 1000);
        }
      }
      issue();
    });
  };
  issue();
}

let pending = setup.clients;
const onFirst = (): void => {
  if (--pending === 0) parentPort!.postMessage({ kind: "ready" } satisfies WorkerReport);
};
for (let i = 0; i < setup.clients; i++) runClient(callers[i % callers.length]!, onFirst);

parentPort!.on("message", (cmd: WorkerCommand) => {
  switch (cmd.kind) {
    case "measure":
      requests = 0;
      errors = 0;
      latency = new LatencyHistogram();
      measuring = true;
      return;
    case "count":
      measuring = cmd.on;
      return;
    case "pause":
      paused = true;
      return;
    case "resume":
      paused = false;
      for (const issue of parked.splice(0)) issue();
      return;
    case "stop":
      break;
  }
  measuring = false;
  stopped = true;
  const report: WorkerReport = {
    kind: "done",
    requests,
    errors,
    firstError,
    latency: latency.counts,
    sumUs: latency.sumUs,
  };
  parentPort!.postMessage(report);
  for (const c of channels) c.close();
  for (const s of sessions) s.destroy();
  for (const r of raws) r.close();
});
