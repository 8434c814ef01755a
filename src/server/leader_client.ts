/**
 * Requests only the leader can answer (lease keep-alive and time-to-live: the leader's lessor
 * owns the expiry clock; a learner's promotion: only the leader knows its progress), forwarded from a follower to the leader's client URL over gRPC, as etcd
 * forwards them over its peer HTTP API. One channel per leader; keep-alives share one stream and
 * are answered in order.
 */
import type * as grpcTypes from "@grpc/grpc-js";
import { Status, type MessageCodec } from "../grpc/index.js";
import type {
  LeaseKeepAliveRequestInit,
  MemberPromoteRequestInit,
  MemberPromoteResponse,
  LeaseKeepAliveResponse,
  LeaseTimeToLiveRequestInit,
  LeaseTimeToLiveResponse,
} from "../pb/member-types.js";
import type { LeaseId } from "../lease/types.js";
import type { NodeId } from "../raft/types.js";
import { EtcdError, Errors } from "./errors.js";
import { loadMemberCodecs } from "../pb/protos.js";
import type { LeaderTls } from "./tls/leader_tls.js";

function method<Req, Res>(path: string, req: MessageCodec<Req>, res: MessageCodec<Res>, responseStream = false, requestStream = false) {
  return {
    path,
    requestStream,
    responseStream,
    requestSerialize: (m: Req) => req.encode(m),
    requestDeserialize: (b: Buffer) => req.decode(b),
    responseSerialize: (m: Res) => res.encode(m),
    responseDeserialize: (b: Buffer) => res.decode(b),
  };
}

/** The leader-only methods a follower forwards (one generic client; each method names its own service path). */
function leaderMethodsDefinition() {
  const c = loadMemberCodecs();
  return {
    MemberPromote: method(
      "/etcdserverpb.Cluster/MemberPromote",
      c.message<MemberPromoteRequestInit>("etcdserverpb.MemberPromoteRequest"),
      c.message<MemberPromoteResponse>("etcdserverpb.MemberPromoteResponse"),
    ),
    LeaseTimeToLive: method(
      "/etcdserverpb.Lease/LeaseTimeToLive",
      c.message<LeaseTimeToLiveRequestInit>("etcdserverpb.LeaseTimeToLiveRequest"),
      c.message<LeaseTimeToLiveResponse>("etcdserverpb.LeaseTimeToLiveResponse"),
    ),
    LeaseKeepAlive: method(
      "/etcdserverpb.Lease/LeaseKeepAlive",
      c.message<LeaseKeepAliveRequestInit>("etcdserverpb.LeaseKeepAliveRequest"),
      c.message<LeaseKeepAliveResponse>("etcdserverpb.LeaseKeepAliveResponse"),
      true,
      true,
    ),
  };
}

type LeaseClient = grpcTypes.Client & {
  MemberPromote(req: MemberPromoteRequestInit, md: grpcTypes.Metadata, opts: grpcTypes.CallOptions, cb: (err: grpcTypes.ServiceError | null, res?: MemberPromoteResponse) => void): void;
  LeaseTimeToLive(req: LeaseTimeToLiveRequestInit, md: grpcTypes.Metadata, opts: grpcTypes.CallOptions, cb: (err: grpcTypes.ServiceError | null, res?: LeaseTimeToLiveResponse) => void): void;
  LeaseKeepAlive(md: grpcTypes.Metadata, opts: grpcTypes.CallOptions): grpcTypes.ClientDuplexStream<LeaseKeepAliveRequestInit, LeaseKeepAliveResponse>;
};

/** One keep-alive stream and the renewals sent on it, answered in order. */
interface KeepAliveStream {
  stream: grpcTypes.ClientDuplexStream<LeaseKeepAliveRequestInit, LeaseKeepAliveResponse>;
  pending: Array<{ resolve(ttl: number): void; reject(e: Error): void }>;
}

let Ctor: grpcTypes.ServiceClientConstructor | undefined;
/**
 * @grpc/grpc-js costs ~14 MB of RSS once loaded; most members never forward (single member, or
 * clients that talk to the leader), so it is loaded on the first forwarded request.
 */
let grpcModule: typeof grpcTypes | undefined;
async function loadGrpc(): Promise<typeof grpcTypes> {
  grpcModule ??= await import("@grpc/grpc-js");
  return grpcModule;
}

export class LeaderClient {
  private leader: NodeId = 0n;
  private client: LeaseClient | undefined;
  /** The keep-alive stream to `leader`, opened by the first renewal forwarded to it. */
  private keepAlives: KeepAliveStream | undefined;

  constructor(
    private readonly timeoutMs: number,
    /** For an https:// leader client URL (src/server/tls/leader_tls.ts). */
    private readonly tls?: LeaderTls,
  ) {}

  private async clientFor(leader: NodeId, url: string): Promise<LeaseClient> {
    if (this.client !== undefined && this.leader === leader) return this.client;
    const grpc = await loadGrpc();
    if (this.client !== undefined && this.leader === leader) return this.client;
    this.close();
    Ctor ??= grpc.makeGenericClientConstructor(leaderMethodsDefinition(), "Leader");
    const target = url.replace(/^https?:\/\//, "");
    const t = this.tls;
    const credentials = url.startsWith("https://")
      ? grpc.credentials.createSsl(t?.rootCerts ?? null, t?.key ?? null, t?.cert ?? null, { rejectUnauthorized: t?.rejectUnauthorized ?? true })
      : grpc.credentials.createInsecure();
    this.client = new Ctor(target, credentials) as unknown as LeaseClient;
    this.leader = leader;
    return this.client;
  }

  /** `token`: the caller's auth token, sent as etcd's "token" metadata. */
  async timeToLive(leader: NodeId, url: string, req: LeaseTimeToLiveRequestInit, token?: string): Promise<LeaseTimeToLiveResponse> {
    const client = await this.clientFor(leader, url);
    const grpc = await loadGrpc();
    const md = new grpc.Metadata();
    if (token !== undefined) md.set("token", token);
    return new Promise((resolve, reject) => {
      client.LeaseTimeToLive(req, md, { deadline: Date.now() + this.timeoutMs }, (err, res) => {
        if (err) reject(forwardedError(err));
        else resolve(res!);
      });
    });
  }

  /** etcd's PromoteMember forwarded to the leader (only it knows whether the learner is in sync). */
  async memberPromote(leader: NodeId, url: string, id: NodeId): Promise<MemberPromoteResponse> {
    const client = await this.clientFor(leader, url);
    const grpc = await loadGrpc();
    return new Promise((resolve, reject) => {
      client.MemberPromote({ ID: id }, new grpc.Metadata(), { deadline: Date.now() + this.timeoutMs }, (err, res) => {
        if (err) reject(forwardedError(err));
        else resolve(res!);
      });
    });
  }

  /** Renews a lease on the leader; resolves with its TTL (0: not found). */
  async keepAlive(leader: NodeId, url: string, id: LeaseId): Promise<number> {
    const client = await this.clientFor(leader, url);
    const grpc = await loadGrpc();
    const ka = (this.keepAlives ??= this.openKeepAlives(client, grpc));
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => reject(Errors.timeout()), this.timeoutMs);
      ka.pending.push({
        resolve: (ttl) => {
          clearTimeout(timer);
          resolve(ttl);
        },
        reject: (e) => {
          clearTimeout(timer);
          reject(e);
        },
      });
      ka.stream.write({ ID: id });
    });
  }

  /**
   * A keep-alive stream to the current leader with its own queue of renewals waiting for an
   * answer. Its end or error fails its own renewals only: a stream to a former leader, cancelled
   * when the leader changed, reports CANCELLED a turn later, after the first renewal for the new
   * leader was queued, and that renewal once failed with it ("leader changed" to a client whose
   * keep-alive went to a follower right after a leader change: test/e2e/lease_forward.test.ts).
   */
  private openKeepAlives(client: LeaseClient, grpc: typeof grpcTypes): KeepAliveStream {
    const stream = client.LeaseKeepAlive(new grpc.Metadata(), {});
    const ka: KeepAliveStream = { stream, pending: [] };
    stream.on("data", (r: LeaseKeepAliveResponse) => ka.pending.shift()?.resolve(r.TTL));
    const fail = (e: Error) => {
      if (this.keepAlives === ka) this.keepAlives = undefined;
      for (const p of ka.pending.splice(0)) p.reject(forwardedError(e));
    };
    stream.on("error", fail);
    stream.on("end", () => fail(Errors.leaderChanged()));
    return ka;
  }

  close(): void {
    const ka = this.keepAlives;
    this.keepAlives = undefined;
    if (ka !== undefined) {
      ka.stream.cancel();
      for (const p of ka.pending.splice(0)) p.reject(Errors.leaderChanged());
    }
    this.client?.close();
    this.client = undefined;
  }
}

function forwardedError(e: Error): Error {
  const code = (e as grpcTypes.ServiceError).code;
  if (code === Status.UNAVAILABLE || code === Status.CANCELLED) return Errors.leaderChanged();
  if (code === Status.DEADLINE_EXCEEDED) return Errors.timeout();
  if (typeof code === "number") return new EtcdError(code as Status, (e as grpcTypes.ServiceError).details);
  return e;
}
