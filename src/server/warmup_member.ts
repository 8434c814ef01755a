/**
 * The warm-up's scratch cluster (src/server/warmup.ts; issue 18, cold start): two complete members
 * of a cluster of their own — each an EtcdServer with its WAL, raft loop, peer transport, apply,
 * MVCC and lessor, and a GrpcServer with the member's client services — on ephemeral 127.0.0.1
 * ports, driven by real gRPC calls over node:http2 sessions to both (so the leader's path and a
 * follower's, which forwards its proposals and reads the leader's index, are both run), then
 * stopped and their directories removed.
 *
 * Why a whole member: what a fresh leader still compiled during its first puts was mostly code the
 * scratch pieces never reach (the WAL's write path, the client services, the member's apply), and
 * code they did reach deoptimized on the member's own objects ("wrong map": another constructor
 * path, other field types; docs/multicore.md, "What the leader still compiles during its first
 * puts"). A scratch member is built by the same constructors and runs the same calls as the
 * member, so the type feedback and optimized code it leaves are the member's.
 *
 * Nothing is shared with the member: its own temp data dir (fsync'd as the member's), its own
 * metrics registry, a silent logger, listeners on ephemeral loopback ports only, env not read (so
 * no ETCD_* variable of the member's reaches it).
 */
import http2 from "node:http2";
import { createServer } from "node:net";
import { randomBytes } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { Registry } from "prom-client";
import { GrpcServer, type MemberServices } from "../grpc/index.js";
import { loadMemberCodecs } from "../pb/protos.js";
import { Quota } from "./api/quota.js";
import { addClientServices, clientPortLimits } from "./client_services.js";
import { parseConfig } from "./config.js";
import { EtcdServer } from "./etcdserver.js";
import { grpcMetrics } from "./grpc_metrics.js";
import { silentLogger } from "./logger.js";
import { type WarmupCodecs, warmupCodecs } from "./warmup_codecs.js";

export class MemberWarmupError extends Error {
  constructor(what: string) {
    super(`warm-up: ${what}`);
    this.name = "MemberWarmupError";
  }
}

/** The scratch cluster was not serving by the warm-up's deadline (a starved host): not a failure. */
export class ScratchClusterTimeout extends Error {
  constructor() {
    super("warm-up: the scratch cluster was not ready within the warm-up's budget");
    this.name = "ScratchClusterTimeout";
  }
}

/** What the scratch cluster answered: each count is of calls that gave the expected answer. */
export interface MemberWarmupCounts {
  /** Puts (and txns) answered OK with a revision past the first. */
  puts: number;
  /** Txns among them whose compare held and whose put was done. */
  txns: number;
  /** Ranges (linearizable and serializable) answered OK with the key just written. */
  ranges: number;
}

/** Members of the scratch cluster: a leader and a follower, the two roles a member serves in. */
const SCRATCH_MEMBERS = 2;
/** Every TXN_EVERY-th put is a txn (a compare that holds, a put on success). */
const TXN_EVERY = 8;
/** A mod revision above any the scratch cluster reaches: "mod_revision < it" holds for every key. */
const MOD_REVISION_ABOVE_ALL = 2 ** 40;
/** Client sessions to each member: a member's first requests arrive on many connections, each set up once. */
const SESSIONS_PER_MEMBER = 8;

/** grpc-go's unary call (etcd 3.4's clientv3, etcdctl, etcd's benchmark tool); with a deadline for etcdctl's --command-timeout. */
const GRPC_GO_USER_AGENT = "grpc-go/1.33.3";
/** clientv3's metadata on every call (etcd 3.4's etcdctl and benchmark tool, as read off the wire). */
const CLIENT_API_VERSION = "3.4";
/**
 * The header orders the scratch calls take in turn: node's own client's, clientv3's over grpc-go
 * without and with a deadline (as etcd 3.4's benchmark tool and etcdctl send them: pseudo-headers,
 * content-type, user-agent, te, grpc-timeout, then clientv3's client-api-version), and
 * grpc-js's (the etcd3 npm client: its metadata first, then user-agent, content-type, te).
 */
const HEADER_ORDERS: ReadonlyArray<(path: string, authority: string) => http2.OutgoingHttpHeaders> = [
  (path) => ({ ":method": "POST", ":path": path, "content-type": "application/grpc", te: "trailers" }),
  (path, authority) => ({ ":method": "POST", ":scheme": "http", ":path": path, ":authority": authority, "content-type": "application/grpc", "user-agent": GRPC_GO_USER_AGENT, te: "trailers", "client-api-version": CLIENT_API_VERSION }),
  (path, authority) => ({ ":method": "POST", ":scheme": "http", ":path": path, ":authority": authority, "content-type": "application/grpc", "user-agent": GRPC_GO_USER_AGENT, te: "trailers", "grpc-timeout": "4999907u", "client-api-version": CLIENT_API_VERSION }),
  (path, authority) => ({ ":authority": authority, ":method": "POST", ":path": path, ":scheme": "http", "grpc-accept-encoding": "identity,deflate,gzip", "accept-encoding": "identity", "user-agent": "grpc-node-js/1.14.7", "content-type": "application/grpc", te: "trailers" }),
];
/** Every PING_EVERY-th call pings its session once its response is read (at most one PING outstanding per session). */
const PING_EVERY = 4;

/** Free ports on 127.0.0.1 for the peer URLs, which every member must know before any starts. */
async function freePorts(n: number): Promise<number[]> {
  const servers = Array.from({ length: n }, () => createServer());
  try {
    return await Promise.all(
      servers.map(
        (srv) =>
          new Promise<number>((resolve, reject) => {
            srv.once("error", reject);
            srv.listen(0, "127.0.0.1", () => {
              const a = srv.address();
              if (a === null || typeof a === "string") reject(new MemberWarmupError("no port for a scratch peer URL"));
              else resolve(a.port);
            });
          }),
      ),
    );
  } finally {
    await Promise.all(servers.map((srv) => new Promise<void>((resolve) => (srv.listening ? srv.close(() => resolve()) : resolve()))));
  }
}

/**
 * Member `i`'s flags: its peer URL among `peerPorts`, its client URL on an ephemeral port, in
 * `dir`. The cluster token is random, so no other scratch cluster (another member's warm-up on the
 * same host) has its cluster id, and a peer message that reached the wrong one would be refused.
 */
function scratchFlags(dir: string, i: number, peerPorts: readonly number[], token: string): string[] {
  const peer = (j: number) => `http://127.0.0.1:${peerPorts[j]}`;
  return [
    `--name=warmup${i}`,
    `--data-dir=${dir}`,
    `--listen-peer-urls=${peer(i)}`,
    `--initial-advertise-peer-urls=${peer(i)}`,
    `--initial-cluster=${peerPorts.map((_, j) => `warmup${j}=${peer(j)}`).join(",")}`,
    `--initial-cluster-token=${token}`,
    "--listen-client-urls=http://127.0.0.1:0",
    "--advertise-client-urls=http://127.0.0.1:0",
    // Ticks of 20 ms: the scratch cluster elects within 0.2-0.4 s instead of etcd's default 1-2 s,
    // and a starved event loop (three members starting on two cores) rarely misses 200 ms of them.
    "--heartbeat-interval=20",
    "--election-timeout=200",
  ];
}

/** One scratch member: its server, its client port, and its directory. */
interface Scratchling {
  dir: string;
  server: EtcdServer | undefined;
  grpc: GrpcServer<MemberServices> | undefined;
  port: number;
}

/** Resolves as `p` does, or rejects with ScratchClusterTimeout at `deadline` (performance.now() time). */
async function beforeDeadline(p: Promise<void>, deadline: number): Promise<void> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => (timer = setTimeout(() => reject(new ScratchClusterTimeout()), Math.max(0, deadline - performance.now()))));
  try {
    await Promise.race([p, late]);
  } finally {
    clearTimeout(timer);
  }
}

async function startMember(m: Scratchling, i: number, peerPorts: readonly number[], token: string, deadline: number): Promise<void> {
  const config = parseConfig(scratchFlags(m.dir, i, peerPorts, token), {});
  const registry = new Registry();
  let fatal: Error | undefined;
  m.server = await EtcdServer.start({ config, logger: silentLogger(), registry, onFatal: (e) => (fatal = e) });
  await beforeDeadline(m.server.ready, deadline);
  if (fatal !== undefined) throw fatal;
  m.grpc = new GrpcServer<MemberServices>({ codecs: loadMemberCodecs(), ...clientPortLimits(config), observer: grpcMetrics(registry, { level: config.metricsLevel }) });
  addClientServices(m.grpc, m.server, new Quota(m.server.v3));
  m.port = (await m.grpc.listen(0, "127.0.0.1")).port;
}

async function stopMember(m: Scratchling): Promise<void> {
  try {
    await m.grpc?.close(0);
    await m.server?.stop();
  } finally {
    rmSync(m.dir, { recursive: true, force: true });
  }
}

/**
 * A running scratch cluster and client sessions to each member. `open` starts it; `close` stops
 * it and removes its directories, also after a failure.
 */
export class ScratchCluster {
  readonly counts: MemberWarmupCounts = { puts: 0, txns: 0, ranges: 0 };
  private readonly codecs: WarmupCodecs = warmupCodecs();
  private sessions: http2.ClientHttp2Session[] = [];
  private calls = 0;
  /** Sessions with a PING not yet acknowledged. */
  private readonly pinging = new Set<http2.ClientHttp2Session>();

  private constructor(private readonly members: readonly Scratchling[]) {
    for (let k = 0; k < SESSIONS_PER_MEMBER; k++) {
      for (const m of members) {
        const session = http2.connect(`http://127.0.0.1:${m.port}`);
        // A session's failure fails its calls (their streams error); it must not crash the member.
        session.on("error", () => {});
        this.sessions.push(session);
      }
    }
  }

  /** Starts the cluster; rejects with ScratchClusterTimeout if it is not serving by `deadline` (performance.now() time). */
  static async open(deadline: number): Promise<ScratchCluster> {
    const members: Scratchling[] = Array.from({ length: SCRATCH_MEMBERS }, () => ({ dir: mkdtempSync(join(tmpdir(), "etcetera-warmup-")), server: undefined, grpc: undefined, port: 0 }));
    try {
      const peerPorts = await freePorts(members.length);
      const token = `etcetera-warmup-${randomBytes(8).toString("hex")}`;
      // Every start settles (each is bounded by the deadline) before any member is stopped, so
      // none is still starting in a directory being removed.
      const starts = await Promise.allSettled(members.map((m, i) => startMember(m, i, peerPorts, token, deadline)));
      const failed = starts.find((r): r is PromiseRejectedResult => r.status === "rejected");
      if (failed !== undefined) throw failed.reason;
      return new ScratchCluster(members);
    } catch (err) {
      await Promise.allSettled(members.map(stopMember));
      throw err;
    }
  }

  /** `n` puts of `key(i)` at once, spread over the sessions: every eighth a txn, every fourth followed by a range of its key. */
  async puts(from: number, n: number, key: (i: number) => Buffer, value: Buffer): Promise<void> {
    await Promise.all(Array.from({ length: n }, (_, k) => this.putAndMaybeRange(from + k, key(from + k), value)));
  }

  private async putAndMaybeRange(i: number, key: Buffer, value: Buffer): Promise<void> {
    const session = this.sessions[i % this.sessions.length];
    const rev = i % TXN_EVERY === TXN_EVERY - 1 ? await this.txnPut(session, key, value) : await this.put(session, key, value);
    if (!(rev > 1)) throw new MemberWarmupError(`a scratch put answered revision ${rev}`);
    this.counts.puts++;
    if ((i & 3) !== 3) return;
    const c = this.codecs;
    const linearizable = (i & 4) !== 0;
    const range = c.rangeResp.decode(await this.call(session, "/etcdserverpb.KV/Range", c.rangeReq.encodeFramed({ key, serializable: !linearizable })));
    // A serializable range on a follower may not have applied the put yet; a linearizable one must see it.
    const found = range.count === 1 && Buffer.from(range.kvs[0]?.key ?? []).equals(key);
    if (!found && linearizable) throw new MemberWarmupError("a scratch linearizable range did not find the key just put");
    this.counts.ranges++;
  }

  private async put(session: http2.ClientHttp2Session | undefined, key: Buffer, value: Buffer): Promise<number> {
    const c = this.codecs;
    const r = c.putResp.decode(await this.call(session, "/etcdserverpb.KV/Put", c.putReq.encodeFramed({ key, value })));
    return Number(r.header?.revision ?? 0);
  }

  /** A put under a compare that always holds (mod revision below any reachable), as an optimistic-concurrency client writes. */
  private async txnPut(session: http2.ClientHttp2Session | undefined, key: Buffer, value: Buffer): Promise<number> {
    const c = this.codecs;
    // CompareTarget MOD (2), CompareResult LESS (2).
    const req = { compare: [{ result: 2, target: 2, key, modRevision: MOD_REVISION_ABOVE_ALL }], success: [{ requestPut: { key, value } }], failure: [{ requestRange: { key } }] };
    const r = c.txnResp.decode(await this.call(session, "/etcdserverpb.KV/Txn", c.txnReq.encodeFramed(req)));
    if (!r.succeeded) throw new MemberWarmupError("a scratch txn's compare did not hold");
    this.counts.txns++;
    return Number(r.header?.revision ?? 0);
  }

  /** One unary call; resolves to its response message (without the gRPC frame header). */
  private call(session: http2.ClientHttp2Session | undefined, path: string, framed: Uint8Array): Promise<Buffer> {
    if (session === undefined || session.destroyed) return Promise.reject(new MemberWarmupError("the scratch cluster is closed"));
    return new Promise<Buffer>((resolve, reject) => {
      const n = this.calls++;
      // A client's header order is the request header object's hidden class (h2/header_block.ts):
      // the first call in another client's order met code compiled for this one only.
      const headers = HEADER_ORDERS[n % HEADER_ORDERS.length]!(path, `127.0.0.1:${session.socket.remotePort}`);
      const stream = session.request(headers);
      const chunks: Buffer[] = [];
      let status: string | undefined;
      stream.on("data", (d: Buffer) => chunks.push(d));
      stream.on("trailers", (t) => (status = String(t["grpc-status"])));
      stream.on("error", reject);
      stream.on("close", () => {
        // grpc-go pings after it reads a response (its BDP estimator; one PING outstanding at a
        // time), and its next call follows.
        if (n % PING_EVERY === 0 && !session.destroyed && !this.pinging.has(session)) {
          this.pinging.add(session);
          session.ping(() => this.pinging.delete(session));
        }
        const body = Buffer.concat(chunks);
        if (status === "0" && body.length >= 5) resolve(body.subarray(5));
        else reject(new MemberWarmupError(`a scratch call to ${path} ended with grpc-status ${status}`));
      });
      stream.end(framed);
    });
  }

  async close(): Promise<void> {
    for (const s of this.sessions) s.destroy();
    this.sessions = [];
    await Promise.all(this.members.map(stopMember));
  }
}
