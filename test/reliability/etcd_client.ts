/**
 * A small etcd v3 gRPC client for the reliability workload, on @grpc/grpc-js and the project's
 * protos: the four KV operations of the history model, watch streams, and the maintenance calls
 * fault injection needs (status, member list, move leader). Deliberately thin: every call maps
 * one-to-one onto an RPC so the recorded history is exactly what went over the wire.
 */
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { join, resolve } from "node:path";
import type { KvOp, KvResult, ObservedKv } from "./history.js";
import type { WatchEvent, WatchKv } from "./watch_history.js";

const ROOT = resolve(import.meta.dirname, "../..");

/** Wire shapes (proto-loader with keepCase, longs and enums as strings, bytes as Buffer). */
interface PbHeader {
  revision: string;
  member_id: string;
}
interface PbKv {
  key: Buffer;
  value: Buffer;
  create_revision: string;
  mod_revision: string;
  version: string;
}
interface PbRangeResponse {
  header: PbHeader;
  kvs: PbKv[];
}
interface PbTxnResponse {
  header: PbHeader;
  succeeded: boolean;
  responses: Array<{ response_range?: PbRangeResponse | null }>;
}
interface PbEvent {
  type: "PUT" | "DELETE";
  kv: PbKv;
  prev_kv: PbKv | null;
}
export interface PbWatchResponse {
  header: PbHeader;
  watch_id: string;
  created: boolean;
  canceled: boolean;
  compact_revision: string;
  cancel_reason: string;
  events: PbEvent[];
}
export interface PbMember {
  ID: string;
  name: string;
  peerURLs: string[];
  clientURLs: string[];
}
export interface MemberStatus {
  memberId: string;
  leader: string;
  raftTerm: number;
  raftIndex: number;
  /** The raft index this member applied (etcd 3.4's raftAppliedIndex). */
  raftAppliedIndex: number;
  revision: number;
}

type Callback<T> = (err: grpc.ServiceError | null, res?: T) => void;
type UnaryMethod = (req: unknown, meta: grpc.Metadata, opts: grpc.CallOptions, cb: Callback<unknown>) => grpc.ClientUnaryCall;

interface EtcdPackage {
  etcdserverpb: Record<"KV" | "Watch" | "Maintenance" | "Cluster", grpc.ServiceClientConstructor>;
}

let cachedPkg: EtcdPackage | undefined;
function pkg(): EtcdPackage {
  if (cachedPkg !== undefined) return cachedPkg;
  const def = protoLoader.loadSync(join(ROOT, "proto/etcdserverpb/rpc.proto"), {
    includeDirs: [join(ROOT, "proto")],
    keepCase: true,
    longs: String,
    enums: String,
    defaults: true,
    oneofs: true,
  });
  cachedPkg = grpc.loadPackageDefinition(def) as unknown as EtcdPackage;
  return cachedPkg;
}

/** Reconnect fast after a member restarts: the defaults back off for up to two minutes. */
const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.initial_reconnect_backoff_ms": 100,
  "grpc.min_reconnect_backoff_ms": 100,
  "grpc.max_reconnect_backoff_ms": 1000,
  "grpc.max_receive_message_length": 64 * 1024 * 1024,
};

function toObserved(kv: PbKv | undefined): ObservedKv | null {
  return kv === undefined ? null : { value: kv.value.toString(), modRevision: Number(kv.mod_revision) };
}

export function toWatchKv(kv: PbKv): WatchKv {
  return { key: kv.key.toString(), value: kv.value.toString(), createRevision: Number(kv.create_revision), modRevision: Number(kv.mod_revision), version: Number(kv.version) };
}

export function toWatchEvent(e: PbEvent, withPrev: boolean): WatchEvent {
  const ev: WatchEvent = { type: e.type === "DELETE" ? "delete" : "put", kv: toWatchKv(e.kv) };
  if (withPrev) ev.prevKv = e.prev_kv === null || e.prev_kv === undefined ? null : toWatchKv(e.prev_kv);
  return ev;
}

/**
 * Whether an error proves the request never reached a server: grpc-js fails fast with this
 * message when the channel has no connection. Anything else may have been applied.
 */
export function definitelyNotSent(err: unknown): boolean {
  const e = err as Partial<grpc.ServiceError>;
  return e.code === grpc.status.UNAVAILABLE && typeof e.details === "string" && e.details.startsWith("No connection established");
}

/** PEM contents of a client certificate, its key and the CA that signed the servers' (test/reliability/chaos_tls.ts). */
export interface ClientTls {
  ca: Buffer;
  cert: Buffer;
  key: Buffer;
}

/** One endpoint's clients (TLS with a client certificate when `tls` is given). */
export class EtcdConnection {
  private readonly kv: grpc.Client;
  private readonly watch: grpc.Client;
  private readonly maintenance: grpc.Client;
  private readonly cluster: grpc.Client;

  constructor(
    readonly endpoint: string,
    tls?: ClientTls,
  ) {
    const p = pkg().etcdserverpb;
    const creds = tls === undefined ? grpc.credentials.createInsecure() : grpc.credentials.createSsl(tls.ca, tls.key, tls.cert);
    this.kv = new p.KV(endpoint, creds, CHANNEL_OPTIONS);
    this.watch = new p.Watch(endpoint, creds, CHANNEL_OPTIONS);
    this.maintenance = new p.Maintenance(endpoint, creds, CHANNEL_OPTIONS);
    this.cluster = new p.Cluster(endpoint, creds, CHANNEL_OPTIONS);
  }

  private unary<T>(client: grpc.Client, method: string, req: unknown, timeoutMs: number): Promise<T> {
    const fn = (client as unknown as Record<string, UnaryMethod>)[method];
    if (fn === undefined) throw new Error(`no method ${method}`);
    return new Promise<T>((res, rej) => {
      fn.call(client, req, new grpc.Metadata(), { deadline: Date.now() + timeoutMs }, (err, out) => (err !== null ? rej(err) : res(out as T)));
    });
  }

  /**
   * Executes one history operation; the result is what the history records. `serializableGets`
   * (TEST-ONLY, to prove the checks have teeth) reads the member's local state without ReadIndex.
   */
  async execute(op: KvOp, timeoutMs: number, serializableGets = false): Promise<KvResult> {
    const key = Buffer.from(op.key);
    switch (op.kind) {
      case "put": {
        const r = await this.unary<{ header: PbHeader }>(this.kv, "Put", { key, value: Buffer.from(op.value) }, timeoutMs);
        return { kind: "put", revision: Number(r.header.revision) };
      }
      case "get": {
        const r = await this.unary<PbRangeResponse>(this.kv, "Range", { key, serializable: serializableGets }, timeoutMs);
        return { kind: "get", revision: Number(r.header.revision), kv: toObserved(r.kvs[0]) };
      }
      case "delete": {
        const r = await this.unary<{ header: PbHeader; deleted: string }>(this.kv, "DeleteRange", { key }, timeoutMs);
        return { kind: "delete", revision: Number(r.header.revision), deleted: Number(r.deleted) };
      }
      case "cas": {
        const compare =
          op.compare.target === "value"
            ? { result: "EQUAL", target: "VALUE", key, value: Buffer.from(op.compare.value) }
            : { result: "EQUAL", target: "MOD", key, mod_revision: String(op.compare.modRevision) };
        const r = await this.unary<PbTxnResponse>(
          this.kv,
          "Txn",
          { compare: [compare], success: [{ request_put: { key, value: Buffer.from(op.value) } }], failure: [{ request_range: { key } }] },
          timeoutMs,
        );
        const revision = Number(r.header.revision);
        if (r.succeeded) return { kind: "cas", revision, succeeded: true };
        const range = r.responses[0]?.response_range;
        return { kind: "cas", revision, succeeded: false, kv: toObserved(range?.kvs[0]) };
      }
    }
  }

  /** This member's applied revision: a serializable Range answered from its local state. */
  async localRevision(key: string, timeoutMs: number): Promise<number> {
    const r = await this.unary<PbRangeResponse>(this.kv, "Range", { key: Buffer.from(key), serializable: true, count_only: true }, timeoutMs);
    return Number(r.header.revision);
  }

  /** Reads each (key, revision) from this member's local state in one Txn of serializable Ranges. */
  async readAt(reads: ReadonlyArray<{ key: string; revision: number }>, timeoutMs: number): Promise<Array<ObservedKv | null>> {
    const success = reads.map((x) => ({ request_range: { key: Buffer.from(x.key), revision: String(x.revision), serializable: true } }));
    const r = await this.unary<PbTxnResponse>(this.kv, "Txn", { compare: [], success, failure: [] }, timeoutMs);
    if (r.responses.length !== reads.length) throw new Error(`readAt: ${r.responses.length} responses for ${reads.length} reads`);
    return r.responses.map((x) => toObserved(x.response_range?.kvs[0]));
  }

  async status(timeoutMs: number): Promise<MemberStatus> {
    const r = await this.unary<{ header: PbHeader; leader: string; raftTerm: string; raftIndex: string; raftAppliedIndex: string }>(this.maintenance, "Status", {}, timeoutMs);
    return {
      memberId: r.header.member_id,
      leader: r.leader,
      raftTerm: Number(r.raftTerm),
      raftIndex: Number(r.raftIndex),
      raftAppliedIndex: Number(r.raftAppliedIndex),
      revision: Number(r.header.revision),
    };
  }

  /** HashKV at `revision` (0: the member's current revision), from this member's local state. */
  async hashKV(revision: number, timeoutMs: number): Promise<{ hash: number; revision: number; compactRevision: number }> {
    const r = await this.unary<{ header: PbHeader; hash: number; compact_revision: string }>(this.maintenance, "HashKV", { revision: String(revision) }, timeoutMs);
    return { hash: Number(r.hash), revision: Number(r.header.revision), compactRevision: Number(r.compact_revision) };
  }

  async memberList(timeoutMs: number): Promise<PbMember[]> {
    const r = await this.unary<{ members: PbMember[] }>(this.cluster, "MemberList", {}, timeoutMs);
    return r.members;
  }

  /** Compacts the key-value history below `revision` (logical compaction, as etcdctl compact). */
  async compact(revision: number, timeoutMs: number): Promise<void> {
    await this.unary(this.kv, "Compact", { revision: String(revision), physical: false }, timeoutMs);
  }

  async defragment(timeoutMs: number): Promise<void> {
    await this.unary(this.maintenance, "Defragment", {}, timeoutMs);
  }

  async moveLeader(targetId: string, timeoutMs: number): Promise<void> {
    await this.unary(this.maintenance, "MoveLeader", { targetID: targetId }, timeoutMs);
  }

  /** A raw Watch stream; `requireLeader` makes a member without a leader cancel it (clientv3's WithRequireLeader). */
  openWatch(requireLeader: boolean): grpc.ClientDuplexStream<unknown, PbWatchResponse> {
    const meta = new grpc.Metadata();
    if (requireLeader) meta.set("hasleader", "true");
    const fn = (this.watch as unknown as Record<string, (m: grpc.Metadata) => grpc.ClientDuplexStream<unknown, PbWatchResponse>>)["Watch"];
    if (fn === undefined) throw new Error("no Watch method");
    return fn.call(this.watch, meta);
  }

  close(): void {
    this.kv.close();
    this.watch.close();
    this.maintenance.close();
    this.cluster.close();
  }
}
