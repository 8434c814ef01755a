/**
 * HashKV of every other member at one revision (etcd's getPeerHashKVs), for the corruption
 * checks. etcd asks over its peer HTTP API (/members/hashkv); etcetera's peer port speaks only
 * raft's own protocol, so the request goes to each member's client URL as a Maintenance.HashKV
 * gRPC call: a member that does not serve clients yet cannot answer (logged, as an unreachable
 * peer is in etcd).
 */
import type * as grpcTypes from "@grpc/grpc-js";
import type { HashKVRequestInit, HashKVResponse } from "../../pb/member-types.js";
import { loadMemberCodecs } from "../../pb/protos.js";
import type { NodeId } from "../../raft/types.js";

export interface PeerHashKv {
  id: NodeId;
  /** The peer's answer, when it gave one. */
  resp?: { memberId: NodeId; revision: number; hash: number; compactRevision: number };
  /** Why it gave none (gRPC details text, e.g. "etcdserver: mvcc: required revision is a future revision"). */
  err?: string;
}

export interface PeerEndpoints {
  id: NodeId;
  clientUrls: readonly string[];
}

type HashKvClient = grpcTypes.Client & {
  HashKV(req: HashKVRequestInit, md: grpcTypes.Metadata, opts: grpcTypes.CallOptions, cb: (err: grpcTypes.ServiceError | null, res?: HashKVResponse) => void): void;
};

let Ctor: grpcTypes.ServiceClientConstructor | undefined;

async function clientConstructor(): Promise<{ grpc: typeof grpcTypes; Ctor: grpcTypes.ServiceClientConstructor }> {
  const grpc = await import("@grpc/grpc-js");
  if (Ctor === undefined) {
    const c = loadMemberCodecs();
    const req = c.message<HashKVRequestInit>("etcdserverpb.HashKVRequest");
    const res = c.message<HashKVResponse>("etcdserverpb.HashKVResponse");
    Ctor = grpc.makeGenericClientConstructor(
      {
        HashKV: {
          path: "/etcdserverpb.Maintenance/HashKV",
          requestStream: false,
          responseStream: false,
          requestSerialize: (m: HashKVRequestInit) => req.encode(m),
          requestDeserialize: (b: Buffer) => req.decode(b),
          responseSerialize: (m: HashKVResponse) => res.encode(m),
          responseDeserialize: (b: Buffer) => res.decode(b),
        },
      },
      "Maintenance",
    );
  }
  return { grpc, Ctor };
}

/** Asks every peer for HashKV(rev), each on its client URLs in turn, all peers at once. */
export async function getPeerHashKVs(peers: readonly PeerEndpoints[], rev: number, timeoutMs: number): Promise<PeerHashKv[]> {
  const { grpc, Ctor: C } = await clientConstructor();
  return Promise.all(
    peers.map(async (p): Promise<PeerHashKv> => {
      let lastErr = "no client URL published";
      for (const url of p.clientUrls) {
        const client = new C(url.replace(/^https?:\/\//, ""), grpc.credentials.createInsecure()) as unknown as HashKvClient;
        try {
          const r = await new Promise<HashKVResponse>((resolve, reject) => {
            client.HashKV({ revision: rev }, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) => (err ? reject(err) : resolve(res!)));
          });
          return { id: p.id, resp: { memberId: r.header?.memberId ?? p.id, revision: r.header?.revision ?? 0, hash: r.hash, compactRevision: r.compactRevision } };
        } catch (e) {
          lastErr = (e as grpcTypes.ServiceError).details ?? String(e);
        } finally {
          client.close();
        }
      }
      return { id: p.id, err: lastErr };
    }),
  );
}
