/**
 * Child process of bench/grpc.ts: serves the trivial Range handler on
 *  - "http2": our node:http2 server (src/grpc/server.ts),
 *  - "grpc-js": @grpc/grpc-js through the adapter, with OUR compiled codecs
 *    (isolates the transport: the strongest grpc-js baseline),
 *  - "grpc-js-protoloader": a plain @grpc/grpc-js server as one is usually
 *    written, services from @grpc/proto-loader (protobufjs serialization),
 * and answers CPU-usage samples over IPC so the parent can charge CPU per
 * request to the server alone.
 *
 *   node --import tsx bench/grpc-server.ts http2|grpc-js|grpc-js-protoloader
 */

import { pathToFileURL } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { GrpcJsServer } from "../test/grpc/grpc-js-adapter.js";
import { ETCD_API_FILES, PROTO_DIR } from "../src/pb/protos.js";
import { GrpcServer } from "../src/grpc/server.js";

export const SERVER_KINDS = ["http2", "grpc-js-protoloader", "grpc-js"] as const;
export type ServerKind = (typeof SERVER_KINDS)[number];
export type ServerMessage = { kind: "listening"; port: number } | { kind: "cpu"; userUs: number; systemUs: number };

/** A serializable Range answered from a constant, as etcd's own benchmark measures it. */
const RANGE_RESPONSE = {
  header: { cluster_id: 0xcdf818194e3a8c32n, member_id: 0x8e9e05c52164694dn, revision: 123456, raft_term: 7 },
  kvs: [{ key: Buffer.from("foo"), value: Buffer.from("bar"), create_revision: 100, mod_revision: 123456, version: 42, lease: 0 }],
  count: 1,
  more: false,
};

const kv = {
  Range: () => RANGE_RESPONSE,
};

interface KvServiceClient {
  service: grpc.ServiceDefinition;
}

/** grpc-js the way its README and etcd's JS clients use it: proto-loader's protobufjs codecs. */
function protoLoaderServer(): grpc.Server {
  const definition = protoLoader.loadSync([...ETCD_API_FILES], {
    includeDirs: [PROTO_DIR],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  const pkg = grpc.loadPackageDefinition(definition) as unknown as { etcdserverpb: { KV: KvServiceClient } };
  const server = new grpc.Server({ "grpc.max_receive_message_length": 2 * 1024 * 1024 });
  server.addService(pkg.etcdserverpb.KV.service, {
    Range: (_call: grpc.ServerUnaryCall<unknown, unknown>, callback: grpc.sendUnaryData<unknown>) => callback(null, RANGE_RESPONSE),
  });
  return server;
}

async function listen(kind: ServerKind): Promise<number> {
  switch (kind) {
    case "http2": {
      const server = new GrpcServer();
      server.addService("etcdserverpb.KV", kv);
      return (await server.listen(0)).port;
    }
    case "grpc-js": {
      const server = new GrpcJsServer();
      server.addService("etcdserverpb.KV", kv);
      return server.listen(0);
    }
    case "grpc-js-protoloader": {
      const server = protoLoaderServer();
      return new Promise((resolve, reject) =>
        server.bindAsync("127.0.0.1:0", grpc.ServerCredentials.createInsecure(), (err, port) => (err ? reject(err) : resolve(port))),
      );
    }
  }
}

async function main(): Promise<void> {
  const kind = process.argv[2] as ServerKind;
  if (!SERVER_KINDS.includes(kind)) throw new Error(`unknown server kind ${kind}`);
  const port = await listen(kind);
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

// Only when run as the child: bench/grpc.ts imports this module for its kinds.
if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) void main();
