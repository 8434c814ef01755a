/**
 * Child process of bench/grpc.ts: serves the trivial Range handler on the
 * node:http2 server ("http2") or on @grpc/grpc-js through the adapter
 * ("grpc-js"), and answers CPU-usage samples over IPC so the parent can charge
 * CPU per request to the server alone.
 *
 *   node --import tsx bench/grpc-server.ts http2|grpc-js
 */

import { GrpcJsServer } from "../src/grpc/grpc-js-adapter.js";
import { GrpcServer } from "../src/grpc/server.js";

export type ServerKind = "http2" | "grpc-js";
export type ServerMessage = { kind: "listening"; port: number } | { kind: "cpu"; userUs: number; systemUs: number };

/** A serializable Range answered from a constant, as etcd's own benchmark measures it. */
const RANGE_RESPONSE = {
  header: { cluster_id: 0x1c9b1b5bd0e7f, member_id: 0x8e9e05c521646, revision: 123456, raft_term: 7 },
  kvs: [{ key: Buffer.from("foo"), value: Buffer.from("bar"), create_revision: 100, mod_revision: 123456, version: 42, lease: 0 }],
  count: 1,
  more: false,
};

const kv = {
  Range: () => RANGE_RESPONSE,
};

async function main(): Promise<void> {
  const kind = process.argv[2] as ServerKind;
  let port: number;
  if (kind === "http2") {
    const server = new GrpcServer();
    server.addService("etcdserverpb.KV", kv);
    port = (await server.listen(0)).port;
  } else if (kind === "grpc-js") {
    const server = new GrpcJsServer();
    server.addService("etcdserverpb.KV", kv);
    port = await server.listen(0);
  } else {
    throw new Error(`unknown server kind ${kind}`);
  }
  process.on("message", (m: { kind: string }) => {
    if (m.kind === "cpu") {
      const u = process.cpuUsage();
      process.send!({ kind: "cpu", userUs: u.user, systemUs: u.system } satisfies ServerMessage);
    } else if (m.kind === "exit") {
      process.exit(0);
    }
  });
  process.send!({ kind: "listening", port } satisfies ServerMessage);
}

void main();
