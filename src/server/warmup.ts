/**
 * Warm-up of a member's hot paths before it serves (issue 18, cold start).
 *
 * Why: a fresh member's first requests run in V8's slower tiers, and V8's compiler threads take
 * ~4× their warm CPU per request for the first thousands of requests (docs/multicore.md, "Cold
 * start"). On a small host shared by the members, that compilation is taken from the members' main
 * threads while they serve. Running the request path's pure functions a few thousand times before
 * the first request moves that compilation (and the type feedback it needs) ahead of it.
 *
 * What runs, first, on scratch buffers and objects only: the client API's protobuf codecs (put,
 * range, txn, lease keep-alive, watch), gRPC message framing, HPACK, the raft request codec, a
 * scratch three-voter raft (src/raft, in memory) whose messages go through the peer transport's
 * codec and whose leader's Readys go through the WAL record codec and its CRC chain, and puts and
 * ranges into a scratch key index. Then real calls — puts, txns, linearizable and serializable
 * ranges over node:http2 — to a scratch cluster of two complete members on ephemeral 127.0.0.1
 * ports in a temporary directory (warmup_member.ts): the member's own gRPC server, services, raft
 * loop, peer transport, WAL with its fsync, apply and MVCC, as leader and as follower. Nothing
 * touches the member's stores, data dir or listeners, so the warm-up changes no state a client or
 * a peer could see. The codecs and classes are the process's own, so the functions warmed, and the
 * hidden classes their type feedback holds, are the ones served. Measured: docs/multicore.md,
 * "Cold start" and "A scratch cluster in the warm-up".
 * The pure codecs alone did not measurably help; the scratch raft, the loopback calls and the
 * scratch cluster did.
 *
 * It runs in slices that yield to the event loop, so it can run while raft elects or catches up
 * without delaying its ticks, heartbeats or votes. It is bounded by a round count and a time
 * budget. ETCETERA_WARMUP=0 turns it off (for A/B measurements; etcd has no such flag).
 *
 * Every round trip is checked: a count in the result is of round trips that gave back what went
 * in, so a codec that broke is a thrown error (and a test failure), not a silent no-op.
 */
import { setImmediate as yieldToLoop } from "node:timers/promises";
import { frameMessage, type MessageSink, MessageDeframer } from "../grpc/framing.js";
import { encodeLiteralBlock, type HeaderField, HpackDecoder } from "../grpc/h2/hpack.js";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { KvStore } from "../mvcc/kvstore.js";
import { packRev, SUB_BITS } from "../mvcc/revision.js";
import { keyToString, TreeIndex } from "../mvcc/tree_index.js";
import { warmupCodecs } from "./warmup_codecs.js";
import { RawNode, type Ready } from "../raft/rawnode.js";
import { MemoryStorage } from "../raft/storage.js";
import { type Entry, type HardState, type Message, type NodeId, StateType } from "../raft/types.js";
import { scanSegment } from "../wal/decoder.js";
import { readEntryPayload, readHardStatePayload, RecordType, RecordWriter } from "../wal/record.js";
import { FrameDecoder, FrameKind } from "./transport/frame.js";
import { envSwitch } from "./env_switch.js";
import { ScratchCluster, ScratchClusterTimeout } from "./warmup_member.js";
import { decodeMessages, encodeMessages } from "./transport/protocol.js";
import { decodeRaftRequest, encodeRaftRequest } from "./raft_request.js";

/**
 * Rounds by default: each is one request's worth of every codec. Fewer since the scratch cluster
 * runs the real request path after them (which is what the cold rows measured; the rounds cost
 * wall time on a starved start, where the scratch cluster's calls then did not finish).
 */
export const WARMUP_ROUNDS = 500;
/**
 * The longest the warm-up may take; on a starved host it stops early rather than delay serving
 * further. Three members starting together on two cores need 5.0-6.1 s to finish it (each gets
 * two thirds of a core, and each runs a scratch cluster of two members); a member alone on a quiet
 * host finishes in ~1.4-1.5 s, so only a starved start waits longer. Cut short, the warm-up is
 * worth little: half the scratch cluster's puts measured no gain at all
 * (bench/results/coldstart-member-2026-12-04.txt), and with the earlier warm-up a budget of 1.5 s
 * left the first 3,000 puts at 1,000 clients 26% slower than the whole
 * (bench/results/coldstart-budget-2026-12-04.txt).
 */
export const WARMUP_BUDGET_MS = 8000;
/**
 * Puts to the scratch cluster by default (warmup_member.ts; every eighth a txn, every fourth
 * followed by a range). Measured on a fresh cluster's first 3,000 puts at 1,000 clients
 * (bench/results/coldstart-member-2026-12-04.txt): 800 changed nothing, 1,600 cut the leader's CPU
 * per put by a third, 3,000 did no better than 1,600 and raised the peak RSS by 20 MB.
 */
export const MEMBER_PUTS = 2000;
/**
 * Of MEMBER_PUTS, the last ones go one at a time, each after the previous answered: one client's
 * round (a Ready of one entry, a raft loop and a WAL that go idle in between, the commit hold's and
 * the PING ACK's timers firing) is a path of its own, and a few single calls among the batches
 * left it cold (issue 18: put at 1 client, cold 0.73x, warm 0.86x). At most a fifth of the puts.
 */
export const MEMBER_SINGLE_PUTS = 400;
/** Work between yields to the event loop: below a raft tick (100 ms by default) by far. */
const SLICE_MS = 5;
/** Distinct keys in the scratch index: enough for the B-tree to split into a few levels. */
const INDEX_KEYS = 1000;
/** Proposals per raft batch (so per Ready, WAL write and MsgApp), as under load. */
const BATCH_ENTRIES = 8;

export interface WarmupOptions {
  rounds?: number;
  budgetMs?: number;
  /** Puts (and the txns and ranges among them) to the scratch cluster (MEMBER_PUTS; 0 for no scratch cluster). */
  memberPuts?: number;
}

/** Verified round trips per path: each could be wrong only if that codec broke. */
export interface WarmupCounts {
  /** Client API protobuf messages encoded and decoded back (10 per round). */
  protobuf: number;
  /** gRPC length-prefixed messages framed and deframed. */
  grpcFrames: number;
  /** HPACK header blocks encoded and decoded. */
  hpackBlocks: number;
  /** WAL records written and scanned back (CRC chain checked): the scratch leader's entries and hard states. */
  walRecords: number;
  /** The scratch raft's messages through the peer transport's frame and message codecs. */
  peerMessages: number;
  /** InternalRaftRequests encoded and decoded. */
  raftRequests: number;
  /** Puts and gets on the scratch key index. */
  indexOps: number;
  /** Puts straight to the primer's store (primeRevisions). */
  primerPuts: number;
  /** Puts the scratch cluster answered with a revision (warmup_member.ts). */
  memberPuts: number;
  /** Puts among them sent alone, each after the previous one was answered (MEMBER_SINGLE_PUTS). */
  memberSinglePuts: number;
  /** Txns among them that succeeded. */
  memberTxns: number;
  /** Ranges of a key just put that found it (linearizable) or answered (serializable). */
  memberRanges: number;
}

export interface WarmupResult {
  rounds: number;
  durationMs: number;
  /** True when the time budget stopped it before its rounds and calls were done. */
  budgetExceeded: boolean;
  /** Why the scratch cluster (or the primer's store) did not run (e.g. its temp dir could not be made), if it did not. */
  memberSkipped?: string;
  counts: WarmupCounts;
}

/**
 * Whether the warm-up runs: ETCETERA_WARMUP=0 turns it off, 1 (or unset) keeps it on; anything
 * else is an error text (refused at start, as the member's other knobs: fail closed).
 */
export function warmupEnabled(env: NodeJS.ProcessEnv): boolean | { error: string } {
  return envSwitch(env, "ETCETERA_WARMUP");
}

class WarmupError extends Error {
  constructor(what: string) {
    super(`warm-up: ${what} did not round-trip`);
    this.name = "WarmupError";
  }
}

function check(ok: boolean, what: string): void {
  if (!ok) throw new WarmupError(what);
}

/** Collects what the deframer completes, as a server call's sink does. */
class CountingSink implements MessageSink {
  bytes = 0;
  messages = 0;
  onFrame(message: Buffer): void {
    this.messages++;
    this.bytes += message.length;
  }
}

/** The scratch state of one warm-up: nothing in it is shared with the member. */
class Scratch {
  readonly codecs = warmupCodecs();
  readonly index = new TreeIndex();
  readonly hpack = new HpackDecoder();
  readonly deframer = new MessageDeframer(4 * 1024 * 1024);
  readonly sink = new CountingSink();
  readonly peerFrames = new FrameDecoder();
  /** 8-byte keys and 256-byte values: etcd benchmark's defaults, the shapes the member will see. */
  readonly value = Buffer.alloc(256, 0x61);
  private keyBuf = Buffer.alloc(8);
  walChain = 0;
  counts: WarmupCounts = { protobuf: 0, grpcFrames: 0, hpackBlocks: 0, walRecords: 0, peerMessages: 0, raftRequests: 0, indexOps: 0, primerPuts: 0, memberPuts: 0, memberSinglePuts: 0, memberTxns: 0, memberRanges: 0 };

  key(i: number): Buffer {
    this.keyBuf = Buffer.alloc(8);
    this.keyBuf.writeUInt32BE(0x77617270, 0); // "warp"
    this.keyBuf.writeUInt32BE(i % INDEX_KEYS, 4);
    return this.keyBuf;
  }
}

/**
 * Values of the sizes a member sends: 64-bit member and cluster ids, request and lease ids of the
 * member's id generator (52 bits, src/server/id_gen.ts). Small numbers would warm the codecs'
 * one-byte varint paths only, and the first real request would throw that code away (deopt).
 */
const HEADER = { clusterId: 0xcdf818194e3a8c32n, memberId: 0x8e9e05c52164694dn, revision: 1, raftTerm: 2 };
const ID_BASE = 0x694d * 2 ** 36;

function sameBytes(a: Uint8Array, b: Uint8Array): boolean {
  return Buffer.compare(a, b) === 0;
}

/** The client API messages of a put, range, txn, keep-alive and watch, each encoded and decoded. */
function protobufRound(s: Scratch, i: number): Buffer {
  const c = s.codecs;
  const key = s.key(i);
  const put = c.putReq.decode(c.putReq.encode({ key, value: s.value, lease: 0, prevKv: false }));
  check(sameBytes(put.key, key) && put.value.length === s.value.length, "PutRequest");
  const putResp = c.putResp.decode(c.putResp.encodeFramed({ header: { ...HEADER, revision: i + 1 } }).subarray(5));
  check(putResp.header?.revision === i + 1, "PutResponse");
  const range = c.rangeReq.decode(c.rangeReq.encode({ key, serializable: (i & 1) === 0 }));
  check(sameBytes(range.key, key) && range.serializable === ((i & 1) === 0), "RangeRequest");
  const kv = { key, createRevision: i + 1, modRevision: i + 1, version: 1, value: s.value, lease: 0 };
  const rangeResp = c.rangeResp.decode(c.rangeResp.encodeFramed({ header: HEADER, kvs: [kv], count: 1 }).subarray(5));
  check(rangeResp.count === 1 && rangeResp.kvs.length === 1 && sameBytes(rangeResp.kvs[0]!.key, key), "RangeResponse");
  const txn = c.txnReq.decode(
    c.txnReq.encode({
      compare: [{ result: 0, target: 1, key, modRevision: i }],
      success: [{ requestPut: { key, value: s.value } }],
      failure: [{ requestRange: { key } }],
    }),
  );
  check(txn.compare.length === 1 && txn.success[0]?.requestPut !== undefined && txn.failure[0]?.requestRange !== undefined, "TxnRequest");
  const txnResp = c.txnResp.decode(c.txnResp.encodeFramed({ header: HEADER, succeeded: true, responses: [{ responsePut: { header: HEADER } }] }).subarray(5));
  check(txnResp.succeeded && txnResp.responses.length === 1, "TxnResponse");
  const ka = c.keepAliveReq.decode(c.keepAliveReq.encode({ ID: ID_BASE + i }));
  check(Number(ka.ID) === ID_BASE + i, "LeaseKeepAliveRequest");
  const kaResp = c.keepAliveResp.decode(c.keepAliveResp.encodeFramed({ header: HEADER, ID: ID_BASE + i, TTL: 60 }).subarray(5));
  check(kaResp.TTL === 60, "LeaseKeepAliveResponse");
  const watch = c.watchReq.decode(c.watchReq.encode({ createRequest: { key, startRevision: i + 1 } }));
  check(watch.createRequest !== undefined && sameBytes(watch.createRequest.key, key), "WatchRequest");
  const watchResp = c.watchResp.decode(c.watchResp.encodeFramed({ header: HEADER, watchId: 1, events: [{ type: 0, kv }] }).subarray(5));
  check(watchResp.events.length === 1, "WatchResponse");
  s.counts.protobuf += 10;
  return c.putReq.encode({ key, value: s.value });
}

/** A request framed as a client sends it (split across two DATA chunks every other round), deframed as the server reads it. */
function grpcFramingRound(s: Scratch, message: Buffer, i: number): void {
  const framed = frameMessage(message);
  const before = s.sink.messages;
  if ((i & 1) === 0) {
    s.deframer.push(framed, s.sink);
  } else {
    const cut = framed.length >> 1;
    s.deframer.push(framed.subarray(0, cut), s.sink);
    s.deframer.push(framed.subarray(cut), s.sink);
  }
  check(s.sink.messages === before + 1 && !s.deframer.partial, "gRPC message framing");
  s.counts.grpcFrames++;
}

const REQUEST_HEADERS: readonly HeaderField[] = [
  { name: ":method", value: "POST", neverIndexed: false },
  { name: ":scheme", value: "http", neverIndexed: false },
  { name: ":path", value: "/etcdserverpb.KV/Put", neverIndexed: false },
  { name: ":authority", value: "127.0.0.1:2379", neverIndexed: false },
  { name: "content-type", value: "application/grpc", neverIndexed: false },
  { name: "te", value: "trailers", neverIndexed: false },
  { name: "grpc-timeout", value: "4999m", neverIndexed: false },
];

function hpackRound(s: Scratch): void {
  const fields = s.hpack.decode(encodeLiteralBlock(REQUEST_HEADERS));
  check(fields.length === REQUEST_HEADERS.length && fields[2]?.value === "/etcdserverpb.KV/Put", "HPACK header block");
  s.counts.hpackBlocks++;
}

/** A Ready's entries and hard state into a WAL buffer as the WAL writes them, scanned back with the CRC chain. */
function walRound(s: Scratch, entries: readonly Entry[], hs: HardState | undefined): void {
  if (entries.length === 0 && hs === undefined) return;
  const w = new RecordWriter(4096, s.walChain);
  const seed = s.walChain;
  for (const e of entries) w.entry(e);
  if (hs !== undefined) w.hardState(hs);
  s.walChain = w.chainCrc;
  const scan = scanSegment(w.finish(), seed);
  const records = entries.length + (hs === undefined ? 0 : 1);
  check(scan.failure === undefined && scan.records.length === records && scan.chainCrc === s.walChain, "WAL records");
  for (let k = 0; k < entries.length; k++) {
    const r = scan.records[k]!;
    check(r.type === RecordType.Entry && readEntryPayload(r.payload).index === entries[k]!.index, "WAL entry record");
  }
  if (hs !== undefined) {
    const r = scan.records[entries.length]!;
    check(r.type === RecordType.HardState && readHardStatePayload(r.payload).commit === hs.commit, "WAL hard state record");
  }
  s.counts.walRecords += records;
}

/** Messages to one peer through a transport frame, as a peer link carries them. */
function peerRound(s: Scratch, sent: readonly Message[]): Message[] {
  const frames = s.peerFrames.push(encodeMessages(sent));
  check(frames.length === 1 && frames[0]!.kind === FrameKind.Messages, "peer frame");
  const got = decodeMessages(frames[0]!.payload);
  check(got.length === sent.length && got.every((m, i) => m.type === sent[i]!.type && m.entries.length === sent[i]!.entries.length), "peer messages");
  s.counts.peerMessages += got.length;
  return got;
}

const RAFT_IDS: readonly NodeId[] = [0x8e9e05c52164694dn, 0x91bc3c398fb3c146n, 0xfd422379fda50e48n];
/** Passes of a stabilize before it is a bug: a batch of proposals settles in a handful. */
const STABILIZE_PASSES_MAX = 100;

/**
 * Three raft voters in memory, configured as the member configures its own (check quorum, pre-vote,
 * etcd's message limits), their messages through the peer codec and the leader's Readys through
 * the WAL codec: the raft state machine's hot paths, on scratch storage.
 */
class ScratchRaft {
  private readonly nodes: { raw: RawNode; storage: MemoryStorage }[];
  committed = 0;

  constructor(private readonly s: Scratch) {
    this.nodes = RAFT_IDS.map((id) => {
      const storage = new MemoryStorage();
      const raw = new RawNode({ id, electionTick: 10, heartbeatTick: 1, storage, maxSizePerMsg: 1024 * 1024, maxInflightMsgs: 4096 / 8, checkQuorum: true, preVote: true, random: () => 0.5 });
      raw.bootstrap([...RAFT_IDS]);
      return { raw, storage };
    });
    this.stabilize();
    this.nodes[0]!.raw.campaign();
    this.stabilize();
    check(this.nodes[0]!.raw.status().softState.raftState === StateType.Leader, "scratch raft election");
  }

  /** Proposes a batch on the leader and runs the cluster until it has committed and applied it everywhere. */
  propose(batch: Uint8Array[]): void {
    const before = this.committed;
    this.nodes[0]!.raw.proposeBatch(batch);
    this.stabilize();
    // Each of the three voters applies each entry once.
    check(this.committed - before === 3 * batch.length, "scratch raft commit");
  }

  private stabilize(): void {
    for (let pass = 0; pass < STABILIZE_PASSES_MAX; pass++) {
      const outbox = new Map<NodeId, Message[]>();
      let busy = false;
      for (let i = 0; i < this.nodes.length; i++) {
        const n = this.nodes[i]!;
        while (n.raw.hasReady()) {
          busy = true;
          const rd = n.raw.ready();
          this.persist(n.storage, rd, i === 0);
          for (const e of rd.committedEntries) if (e.data.byteLength > 0) this.committed++;
          for (const m of rd.messages) {
            const q = outbox.get(m.to) ?? [];
            q.push(m);
            outbox.set(m.to, q);
          }
          n.raw.advance(rd);
        }
      }
      for (const [to, msgs] of outbox) {
        const n = this.nodes[RAFT_IDS.indexOf(to)]!;
        for (const m of peerRound(this.s, msgs)) n.raw.step(m);
      }
      if (!busy && outbox.size === 0) return;
    }
    throw new WarmupError("scratch raft (never settled)");
  }

  private persist(storage: MemoryStorage, rd: Ready, walToo: boolean): void {
    if (rd.entries.length > 0) storage.append(rd.entries);
    if (rd.hardState !== undefined) storage.setHardState(rd.hardState);
    // The WAL codec once per Ready (the leader's): three buffers of the same bytes warm nothing more.
    if (walToo) walRound(this.s, rd.entries, rd.hardState);
  }
}

/** Every TXN_EVERY-th request is a txn (a compare that holds, a put on success), the rest puts. */
const TXN_EVERY = 4;
/** A mod revision above any a scratch request could name: "mod_revision < it" holds for every key. */
const MOD_REVISION_ABOVE_ALL = 2 ** 40;

function raftRequestRound(s: Scratch, i: number): Buffer {
  const key = s.key(i);
  const id = ID_BASE + i;
  const header = { ID: id, username: "", authRevision: 0 };
  const put = { key, value: s.value };
  const txn = i % TXN_EVERY === TXN_EVERY - 1;
  const data = txn
    ? encodeRaftRequest({
        ID: id,
        header,
        // CompareTarget MOD (2), CompareResult LESS (2).
        txn: { compare: [{ result: 2, target: 2, key, modRevision: MOD_REVISION_ABOVE_ALL }], success: [{ requestPut: put }], failure: [{ requestRange: { key } }] },
      })
    : encodeRaftRequest({ ID: id, header, put });
  const back = decodeRaftRequest(data);
  const backKey = txn ? back.txn?.success[0]?.requestPut?.key : back.put?.key;
  check(back.ID === id && backKey !== undefined && sameBytes(backKey, key), "InternalRaftRequest");
  s.counts.raftRequests++;
  return data;
}

/** A put then a point get and a short range on the scratch index, as apply and a range do. */
function indexRound(s: Scratch, i: number): void {
  const key = keyToString(s.key(i));
  const rev = packRev(i + 1, 0);
  s.index.put(key, rev);
  check(s.index.get(key, rev) === rev, "key index put/get");
  let seen = 0;
  s.index.visitRange({ start: key, end: key + "\u00ff" }, rev, () => {
    seen++;
  });
  check(seen === 1, "key index range");
  s.counts.indexOps += 3;
}

/**
 * Batches of calls in flight at once to the scratch cluster, in turn: a thousand clients' batches
 * and one client's calls take different branches (a Ready of many entries or of one, a raft loop
 * that goes idle between them).
 */
const MEMBER_CONCURRENCY = [128, 1, 32];

/**
 * The member's whole request path as real calls take it, on the scratch cluster
 * (warmup_member.ts), until `puts` are done or the deadline. Returns whether they were all done;
 * a scratch cluster that cannot be made is the skip reason, not an error (the rest of the warm-up
 * stands).
 */
async function memberCalls(s: Scratch, puts: number, deadline: number): Promise<{ done: boolean; skipped?: string }> {
  const prelude = await preludeCalls(s, deadline);
  if (prelude !== "done") return prelude;
  const cluster = await openScratch(deadline);
  if (!(cluster instanceof ScratchCluster)) return cluster;
  try {
    let done = 0;
    const batched = puts - Math.min(MEMBER_SINGLE_PUTS, Math.floor(puts / 5));
    for (let turn = 0; done < puts && performance.now() < deadline; turn++) {
      const n = done < batched ? Math.min(MEMBER_CONCURRENCY[turn % MEMBER_CONCURRENCY.length] ?? 1, batched - done) : 1;
      await cluster.puts(done, n, (i) => s.key(i), s.value);
      done += n;
      if (done > batched) s.counts.memberSinglePuts += n;
    }
    return { done: done === puts };
  } finally {
    s.counts.memberPuts = cluster.counts.puts;
    s.counts.memberTxns = cluster.counts.txns;
    s.counts.memberRanges = cluster.counts.ranges;
    await cluster.close();
  }
}

/**
 * The first main revision whose packed revisions (main * 2^SUB_BITS + sub) are past V8's small
 * integers (31 bits and a sign): 2,048.
 */
export const FIRST_HEAP_NUMBER_REVISION = 2 ** (31 - SUB_BITS);
/** Puts to the scratch store of primeRevisions: its revision ends past FIRST_HEAP_NUMBER_REVISION. */
export const PRIMER_PUTS = FIRST_HEAP_NUMBER_REVISION + 64;

/**
 * Puts to an MVCC store of its own (a temp SQLite file, no raft) until its packed revisions no
 * longer fit V8's small integers. Up to main revision 2,047 every packed revision is a small
 * integer, so code compiled on a store below it (the scratch cluster's, a fresh member's) keeps
 * revisions as such, and the member's 2,048th revision then changes the representation of every
 * row, key index and cache field holding one: measured on a fresh leader, the revision crossing
 * it deoptimized a put's whole mvcc path (the put, the row's backend and cache, the key index)
 * inside its first 3,000 puts. Crossed here, before the scratch cluster runs, those fields hold
 * heap numbers from the start and the code the member keeps is compiled for them. ~2,100 puts
 * straight to a store take tens of milliseconds.
 */
function primeRevisions(s: Scratch): { skipped?: string } {
  let dir: string;
  try {
    dir = mkdtempSync(join(tmpdir(), "etcetera-warmup-store-"));
  } catch (err) {
    return { skipped: `no primer store (${String(err)})` };
  }
  try {
    const store = KvStore.open({ path: join(dir, "db.sqlite") });
    try {
      const key = Buffer.alloc(8);
      key.writeUInt32BE(0x7072696d, 0); // "prim"
      for (let i = 0; i < PRIMER_PUTS; i++) {
        key.writeUInt32BE(i, 4);
        store.put(s.codecs.putReq.decode(s.codecs.putReq.encode({ key, value: s.value })));
      }
      check(store.currentRevision() > FIRST_HEAP_NUMBER_REVISION, "the primer store's revisions");
      s.counts.primerPuts = PRIMER_PUTS;
    } finally {
      store.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  return {};
}

/** Opens a scratch cluster, or says why not: not serving by the deadline is the budget's, anything else a skip reason. */
async function openScratch(deadline: number): Promise<ScratchCluster | { done: false; skipped?: string }> {
  try {
    return await ScratchCluster.open(deadline);
  } catch (err) {
    if (err instanceof ScratchClusterTimeout) return { done: false };
    return { done: false, skipped: `no scratch cluster (${String(err)})` };
  }
}

/** Puts to the prelude's scratch cluster: each branch of MEMBER_CONCURRENCY once, a few single calls. */
const PRELUDE_PUTS = [64, 1, 16, 1, 1];

/**
 * A first scratch cluster, called briefly and closed before the one the warm-up's calls run on.
 * Closing a cluster changes its objects in ways serving never does (fields set once at
 * construction are set again, streams and sessions end), and V8 throws away every optimized
 * function that assumed them unchanged: measured on a fresh leader, closing the warm-up's only
 * cluster deoptimized the request path's hottest functions (the put handler, raft's propose and
 * loop, the HTTP/2 header and frame handlers), which then compiled again during the member's first
 * 3,000 puts at 1,000 clients (69 TurboFan compiles, 440 ms of compiler threads). Closed first,
 * the prelude's cluster makes those changes before the code that the member keeps is compiled.
 */
async function preludeCalls(s: Scratch, deadline: number): Promise<"done" | { done: boolean; skipped?: string }> {
  const cluster = await openScratch(deadline);
  if (!(cluster instanceof ScratchCluster)) return cluster;
  try {
    let done = 0;
    for (const n of PRELUDE_PUTS) {
      if (performance.now() >= deadline) return { done: false };
      await cluster.puts(done, n, (i) => s.key(i), s.value);
      done += n;
    }
    return "done";
  } finally {
    await cluster.close();
  }
}

/**
 * Runs the warm-up: `rounds` rounds (WARMUP_ROUNDS) or until `budgetMs` (WARMUP_BUDGET_MS) has
 * passed, yielding to the event loop every few milliseconds, then the scratch cluster's calls
 * within the same budget. Throws if a round trip failed.
 */
export async function warmUp(options: WarmupOptions = {}): Promise<WarmupResult> {
  const rounds = options.rounds ?? WARMUP_ROUNDS;
  const budgetMs = options.budgetMs ?? WARMUP_BUDGET_MS;
  const puts = options.memberPuts ?? MEMBER_PUTS;
  const start = performance.now();
  const s = new Scratch();
  let done = 0;
  let budgetExceeded = false;
  const raft = new ScratchRaft(s);
  let batch: Uint8Array[] = [];
  while (done < rounds) {
    const sliceEnd = performance.now() + SLICE_MS;
    while (done < rounds && performance.now() < sliceEnd) {
      const i = done;
      const request = protobufRound(s, i);
      grpcFramingRound(s, request, i);
      hpackRound(s);
      batch.push(raftRequestRound(s, i));
      if (batch.length === BATCH_ENTRIES) {
        raft.propose(batch);
        batch = [];
      }
      indexRound(s, i);
      done++;
    }
    if (performance.now() - start > budgetMs) {
      budgetExceeded = done < rounds;
      break;
    }
    await yieldToLoop();
  }
  if (batch.length > 0) raft.propose(batch);
  // After the rounds, not beside them: a call takes several turns of the event loop, and beside
  // the rounds each turn waited for a slice of them.
  let memberSkipped: string | undefined;
  if (puts > 0 && !budgetExceeded) {
    const primer = primeRevisions(s);
    const r = await memberCalls(s, puts, start + budgetMs);
    budgetExceeded = !r.done && r.skipped === undefined;
    memberSkipped = r.skipped ?? primer.skipped;
  } else if (puts > 0) {
    budgetExceeded = true;
  }
  return { rounds: done, durationMs: performance.now() - start, budgetExceeded, counts: s.counts, ...(memberSkipped !== undefined ? { memberSkipped } : {}) };
}
