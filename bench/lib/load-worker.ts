/**
 * One load-driver worker: opens its share of connections (one grpc-js channel
 * each, no subchannel sharing) and runs its share of clients, each a loop of
 * one unary request at a time.
 */

import { parentPort, workerData } from "node:worker_threads";
import * as grpc from "@grpc/grpc-js";
import { LatencyHistogram } from "./histogram.js";
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

const channels: grpc.Client[] = [];
for (let i = 0; i < setup.connections; i++) {
  channels.push(
    new grpc.Client(setup.target, grpc.credentials.createInsecure(), {
      "grpc.use_local_subchannel_pool": 1,
      "grpc.max_receive_message_length": -1,
      // The driver must stay light: no retry buffering, no channelz bookkeeping.
      "grpc.enable_retries": 0,
      "grpc.enable_channelz": 0,
    }),
  );
}

function runClient(client: grpc.Client, onFirst: () => void): void {
  let first = true;
  const issue = (): void => {
    if (stopped) return;
    if (paused) {
      parked.push(issue);
      return;
    }
    const t0 = performance.now();
    client.makeUnaryRequest(setup.path, serialize, deserialize, request, (err) => {
      if (first) {
        first = false;
        onFirst();
      }
      if (measuring) {
        if (err) {
          errors++;
          firstError ??= `${err.code} ${err.details}`;
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
for (let i = 0; i < setup.clients; i++) runClient(channels[i % channels.length]!, onFirst);

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
});
