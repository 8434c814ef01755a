/**
 * One etcd member (etcd's etcdserver.EtcdServer): the Raft loop, the apply loop, proposals and
 * linearizable reads, wired to the WAL, the MVCC store, the lessor and the peer transport.
 *
 * Data flows one way: a handler proposes → the proposal batch enters raft at the next turn →
 * each Ready is persisted (one fdatasync), its messages sent, its committed entries applied →
 * the applier wakes the handler waiting on the request id.
 */
import { mkdirSync, writeFileSync, openSync, fsyncSync, closeSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import type { Registry } from "prom-client";
import { Backend } from "../backend/backend.js";
import { registerServerMetrics, type ServerCounters } from "./metrics.js";
import { EXPIRY_POLL_INTERVAL_MS, Lessor } from "../lease/lessor.js";
import { minLeaseTtlSec } from "../lease/ttl.js";
import { KvStore } from "../mvcc/kvstore.js";
import { WatchableStore } from "../mvcc/watchable_store.js";
import { RawNode, ProposalDroppedError, type Ready } from "../raft/index.js";
import {
  MessageType,
  NONE,
  StateType,
  type ConfState,
  type Message,
  type NodeId,
  type ReadState,
  type Snapshot,
  type SoftState,
} from "../raft/types.js";
import { Alarms } from "./alarms.js";
import { Applier, type ApplyOutcome } from "./apply.js";
import { ETCD_API_VERSION, type ServerConfig } from "./config.js";
import { Errors } from "./errors.js";
import { IdGenerator } from "./id_gen.js";
import { componentLogger, type Logger } from "./logger.js";
import { initialClusterInfo, formatId, type Member } from "./member.js";
import { Membership } from "./membership.js";
import { encodeRaftRequest, type ProposedRequest } from "./raft_request.js";
import { RaftStorage } from "./raft_storage.js";
import { Transport } from "./transport/transport.js";
import { Wait } from "./wait.js";

/** etcd's maxGapBetweenApplyAndCommitIndex: beyond it new proposals get "too many requests". */
const MAX_GAP_BETWEEN_APPLY_AND_COMMIT = 5000;
/** Bound on proposals waiting for their entry to apply. */
const MAX_PENDING_PROPOSALS = 100_000;
/** Bound on linearizable reads waiting for the next ReadIndex round. */
const MAX_PENDING_READS = 100_000;
/** etcd's readIndexRetryTime. */
const READ_INDEX_RETRY_MS = 500;
/** Entries applied per turn before yielding to the event loop. */
const APPLY_BATCH_MAX = 1024;

export interface EtcdServerOptions {
  config: ServerConfig;
  logger: Logger;
  registry: Registry;
  /** Called when the node cannot continue safely (storage failure); the process must exit. */
  onFatal(err: Error): void;
}

interface ReadRound {
  ctxKey: string;
  ctx: Buffer;
  waiters: Array<{ resolve(): void; reject(e: Error): void }>;
  retry: NodeJS.Timeout;
  deadline: NodeJS.Timeout;
}

export class EtcdServer {
  readonly memberId: NodeId;
  readonly clusterId: number;
  readonly config: ServerConfig;
  /** The one database every store below lives in; this server opens, commits and restores it. */
  readonly backend: Backend;
  readonly kv: KvStore;
  /** Watchers over `kv`: every applied revision's events reach them in the same turn. */
  readonly watchable: WatchableStore;
  readonly lessor: Lessor;
  readonly membership: Membership;
  readonly alarms: Alarms;

  private readonly rootLogger: Logger;
  private readonly logger: Logger;
  private readonly raftLogger: Logger;
  private raw!: RawNode;
  private rs!: RaftStorage;
  private transport!: Transport;
  private applier!: Applier;
  private readonly initialMembers: Map<NodeId, Member>;
  private readonly ids: IdGenerator;
  private readonly wait = new Wait<ApplyOutcome>(MAX_PENDING_PROPOSALS);
  private readonly onFatal: (err: Error) => void;
  private readonly counters: ServerCounters;
  readonly requestTimeoutMs: number;

  private leaderId: NodeId = NONE;
  private raftState: StateType = StateType.Follower;
  private term = 0;
  private committedIndex = 0;
  private appliedIndex = 0;
  private snapshotIndex = 0;
  private confState: ConfState = { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false };

  private proposals: Array<{ id: number; data: Buffer }> = [];
  private readonly deadlines: Array<{ id: number; atMs: number }> = [];
  private deadlineHead = 0;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private readyScheduled = false;
  private loopRunning = false;
  private loopAgain = false;
  private stopped = false;
  private readonly appliedWaiters: Array<{ index: number; resolve(): void }> = [];
  private readPending: ReadRound["waiters"] = [];
  private readRound: ReadRound | undefined;
  private readSeq = 0;
  private tickTimer: NodeJS.Timeout | undefined;
  private leaseTimer: NodeJS.Timeout | undefined;
  private readonly leaderWatchers = new Set<() => void>();
  private published = false;
  private campaignedAlone = false;
  private readyResolve!: () => void;
  /** Resolves once this member has published itself and serves clients (etcd's ReadyNotify). */
  readonly ready: Promise<void>;

  private constructor(o: EtcdServerOptions) {
    this.config = o.config;
    this.rootLogger = o.logger;
    this.logger = componentLogger(o.logger, "etcdserver");
    this.raftLogger = componentLogger(o.logger, "raft");
    this.onFatal = o.onFatal;
    const info = initialClusterInfo(o.config);
    this.memberId = info.local.id;
    this.clusterId = info.clusterId;
    this.initialMembers = new Map(info.members.map((m) => [m.id, m]));
    this.ids = new IdGenerator(this.memberId, Date.now());
    this.requestTimeoutMs = 5000 + 2 * o.config.electionMs;
    this.ready = new Promise((r) => (this.readyResolve = r));

    const memberDir = join(o.config.dataDir, "member");
    mkdirSync(o.config.snapDir, { recursive: true });
    mkdirSync(memberDir, { recursive: true });
    this.backend = Backend.open(join(o.config.snapDir, "db"));
    // Stores recover from a snapshot in the order they register, as etcd's: lease, mvcc, alarms, members.
    this.lessor = new Lessor({
      backend: this.backend,
      now: () => performance.now(),
      memberId: this.memberId,
      idSeedMs: Date.now(),
      minLeaseTtlSec: minLeaseTtlSec(Math.round(o.config.electionMs / o.config.heartbeatMs), o.config.heartbeatMs),
      registry: o.registry,
    });
    this.kv = KvStore.open({ backend: this.backend, leases: this.lessor });
    this.lessor.setRangeDeleter(this.kv);
    this.watchable = new WatchableStore(this.kv, { progressNotifyIntervalMs: o.config.watchProgressNotifyIntervalMs });
    this.alarms = new Alarms(this.backend);
    this.membership = new Membership(this.backend, this.clusterId);
    this.counters = registerServerMetrics(
      o.registry,
      {
        hasLeader: () => this.leaderId !== NONE,
        isLeader: () => this.raftState === StateType.Leader,
        isLearner: () => this.isLearner(),
        committedIndex: () => this.committedIndex,
        appliedIndex: () => this.appliedIndex,
        pendingProposals: () => this.wait.size,
        // Installing a received snapshot is one synchronous step: a scrape never lands inside it.
        applyingSnapshot: () => false,
      },
      { memberIdHex: this.memberId.toString(16), version: ETCD_API_VERSION, quotaBackendBytes: o.config.quotaBackendBytes ?? 0 },
    );
  }

  static async start(o: EtcdServerOptions): Promise<EtcdServer> {
    const s = new EtcdServer(o);
    await s.startRaft(o.registry);
    return s;
  }

  private async startRaft(registry: Registry): Promise<void> {
    const c = this.config;
    const { storage, existed, snapshot } = await RaftStorage.open({
      walDir: c.walDir,
      snapDir: c.snapDir,
      memberId: this.memberId,
      clusterId: this.clusterId,
      maxWals: c.maxWals,
      maxSnapshots: c.maxSnapshots,
      snapshotCatchUpEntries: c.snapshotCatchUpEntries,
      logger: componentLogger(this.rootLogger, "wal"),
      registry,
    });
    this.rs = storage;
    if (!existed && this.kv.consistentIndex() > 0) {
      throw new Error(`${join(c.snapDir, "db")} holds data applied up to index ${this.kv.consistentIndex()} but ${c.walDir} has no WAL: refusing to start`);
    }
    if (snapshot !== undefined) this.recoverFromSnapshot(snapshot);
    this.appliedIndex = Math.max(snapshot?.metadata.index ?? 0, 0);
    this.snapshotIndex = snapshot?.metadata.index ?? 0;
    this.confState = snapshot?.metadata.confState ?? this.confState;

    this.raw = new RawNode({
      id: this.memberId,
      electionTick: Math.max(1, Math.round(c.electionMs / c.heartbeatMs)),
      heartbeatTick: 1,
      storage: this.rs.memory,
      applied: this.appliedIndex,
      maxSizePerMsg: 1024 * 1024,
      maxInflightMsgs: 4096 / 8,
      checkQuorum: true,
      preVote: c.preVote,
      random: Math.random,
      logger: {
        debug: (m) => this.raftLogger.debug(m),
        info: (m) => this.raftLogger.info(m),
        warn: (m) => this.raftLogger.warn(m),
      },
    });
    if (!existed) {
      if (c.initialClusterState === "existing") {
        throw new Error("--initial-cluster-state=existing (joining a running cluster) is not supported yet: start every member with --initial-cluster-state=new");
      }
      this.logger.info({ memberId: formatId(this.memberId), clusterId: formatId(this.clusterId), initialCluster: c.initialClusterText }, "starting a new member of a new cluster");
      this.raw.bootstrap([...this.initialMembers.keys()]);
    }
    this.applier = new Applier({
      kv: this.kv,
      lessor: this.lessor,
      membership: this.membership,
      alarms: this.alarms,
      logger: this.logger,
      initialMembers: this.initialMembers,
      applyConfChange: (cc) => (this.confState = this.raw.applyConfChange(cc)),
      onMembershipChange: () => this.syncPeers(),
    });

    const peers = new Map<NodeId, readonly string[]>();
    for (const m of this.initialMembers.values()) if (m.id !== this.memberId) peers.set(m.id, m.peerUrls);
    for (const m of this.membership.list()) if (m.id !== this.memberId) peers.set(m.id, m.peerUrls);
    this.transport = new Transport({
      localId: this.memberId,
      clusterId: this.clusterId,
      clusterToken: c.initialClusterToken,
      listenUrls: c.listenPeerUrls,
      peers,
      onMessage: (m) => this.onPeerMessage(m),
      onUnreachable: (id) => {
        this.raw.reportUnreachable(id);
        this.schedule();
      },
      onSnapshotStatus: (id, failed) => {
        this.raw.reportSnapshot(id, failed);
        this.schedule();
      },
      logger: componentLogger(this.rootLogger, "rafthttp"),
      registry,
    });
    await this.transport.start();

    this.tickTimer = setInterval(() => {
      this.raw.tick();
      this.schedule();
    }, c.heartbeatMs);
    this.leaseTimer = setInterval(() => this.revokeExpiredLeases(), EXPIRY_POLL_INTERVAL_MS);
    this.deadlineTimer = setInterval(() => this.sweepDeadlines(), 100);
    this.schedule();
    void this.publish();
  }

  /** Brings the backend to a snapshot the WAL starts from, when the crash came before it was installed. */
  private recoverFromSnapshot(snap: Snapshot): void {
    if (this.kv.consistentIndex() >= snap.metadata.index) return;
    const dbPath = this.snapshotDbPath(snap.metadata.index);
    this.logger.warn({ snapshotIndex: snap.metadata.index, consistentIndex: this.kv.consistentIndex(), dbPath }, "backend is behind the snapshot; installing the snapshot's database");
    this.backend.restore(dbPath);
  }

  private snapshotDbPath(index: number): string {
    return join(this.config.snapDir, `${index.toString(16).padStart(16, "0")}.snap.db`);
  }

  // ------------------------------------------------------------------ raft loop

  private onPeerMessage(m: Message): void {
    if (this.stopped) return;
    try {
      this.raw.step(m);
    } catch (err) {
      this.raftLogger.warn({ err: String(err), type: MessageType[m.type], from: formatId(m.from) }, "dropped a peer message raft refused");
    }
    this.schedule();
  }

  private schedule(): void {
    if (this.readyScheduled || this.stopped) return;
    this.readyScheduled = true;
    setImmediate(() => {
      this.readyScheduled = false;
      void this.runLoop();
    });
  }

  private async runLoop(): Promise<void> {
    if (this.loopRunning) {
      this.loopAgain = true;
      return;
    }
    this.loopRunning = true;
    try {
      do {
        this.loopAgain = false;
        this.flushProposals();
        while (!this.stopped && this.raw.hasReady()) await this.handleReady(this.raw.ready());
        if (!this.stopped && this.appliedIndex - this.snapshotIndex > this.config.snapshotCount) await this.takeSnapshot();
      } while (this.loopAgain && !this.stopped);
    } catch (err) {
      this.logger.fatal({ err: String(err), stack: (err as Error).stack }, "raft loop failed; stopping the member");
      this.stopped = true;
      this.onFatal(err as Error);
    } finally {
      this.loopRunning = false;
    }
  }

  private flushProposals(): void {
    if (this.proposals.length === 0) return;
    const batch = this.proposals;
    this.proposals = [];
    try {
      this.raw.proposeBatch(batch.map((p) => p.data));
    } catch (err) {
      if (!(err instanceof ProposalDroppedError)) throw err;
      const make = err.reason === "no leader" ? Errors.noLeader : Errors.leaderChanged;
      for (const p of batch) this.failProposal(p.id, make());
    }
  }

  private async handleReady(rd: Ready): Promise<void> {
    if (rd.softState) this.onSoftState(rd.softState);
    if (rd.hardState) {
      this.term = rd.hardState.term;
      this.committedIndex = Math.max(this.committedIndex, rd.hardState.commit);
    }
    let snapshot = rd.snapshot;
    if (snapshot !== undefined && snapshot.data.length > 0) snapshot = this.stageIncomingSnapshot(snapshot);
    // The leader may send before its own write (see rawnode.ts); any node may when the Ready
    // promises nothing durable (no entries, snapshot, term or vote: only the commit index moved).
    const sendEarly = rd.canSendBeforePersist || (!rd.mustSync && rd.entries.length === 0 && snapshot === undefined);
    if (sendEarly) this.send(rd.messages);

    // Entries durable in earlier Readies are applied while this Ready's fsync runs.
    const durableLast = snapshot === undefined ? this.rs.memory.lastIndex() : 0;
    const cut = rd.committedEntries.findIndex((e) => e.index > durableLast);
    const early = cut === -1 ? rd.committedEntries : rd.committedEntries.slice(0, cut);
    const late = cut === -1 ? [] : rd.committedEntries.slice(cut);
    const persisting = this.rs.persist(rd.hardState, rd.entries, snapshot);
    await this.applyEntries(early);
    await persisting;

    if (!sendEarly) this.send(rd.messages);
    if (snapshot !== undefined) this.applySnapshot(snapshot);
    await this.applyEntries(late);
    if (rd.readStates.length > 0) this.onReadStates(rd.readStates);
    this.raw.advance(rd);
    this.campaignIfAlone();
  }

  private send(msgs: Message[]): void {
    if (msgs.length === 0) return;
    const plain: Message[] = [];
    for (const m of msgs) {
      if (m.type === MessageType.MsgSnap) void this.sendSnapshot(m);
      else plain.push(m);
    }
    this.transport.send(plain);
  }

  /** A MsgSnap leaves with the whole backend image in place of raft's (empty) snapshot data. */
  private async sendSnapshot(m: Message): Promise<void> {
    const tmp = join(this.config.snapDir, `outgoing-${m.to.toString(16)}-${Date.now()}.db`);
    try {
      await this.backend.snapshot(tmp);
      const data = readFileSync(tmp);
      this.logger.info({ to: formatId(m.to), index: m.snapshot?.metadata.index, sizeBytes: data.length }, "sending database snapshot");
      this.transport.send([{ ...m, snapshot: { metadata: m.snapshot!.metadata, data } }]);
    } catch (err) {
      this.logger.warn({ to: formatId(m.to), err: String(err) }, "failed to send snapshot");
      this.raw.reportSnapshot(m.to, true);
      this.schedule();
    } finally {
      rmSync(tmp, { force: true });
    }
  }

  /** Writes a received database image beside the snapshot files, durably, before the marker. */
  private stageIncomingSnapshot(snap: Snapshot): Snapshot {
    const path = this.snapshotDbPath(snap.metadata.index);
    writeFileSync(path, snap.data);
    const fd = openSync(path, "r");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    this.logger.info({ index: snap.metadata.index, term: snap.metadata.term, sizeBytes: snap.data.length }, "received database snapshot");
    return { metadata: snap.metadata, data: new Uint8Array(0) };
  }

  private applySnapshot(snap: Snapshot): void {
    // Every store (leases, keys, alarms, members) reloads from the image; watchers catch up.
    this.backend.restore(this.snapshotDbPath(snap.metadata.index));
    this.confState = snap.metadata.confState;
    this.appliedIndex = Math.max(snap.metadata.index, this.kv.consistentIndex());
    this.snapshotIndex = snap.metadata.index;
    this.syncPeers();
    this.logger.info({ index: snap.metadata.index, appliedIndex: this.appliedIndex }, "applied incoming snapshot");
    this.notifyApplied();
  }

  private async applyEntries(entries: Ready["committedEntries"]): Promise<void> {
    for (let i = 0; i < entries.length; i++) {
      const e = entries[i]!;
      if (e.index <= this.appliedIndex) continue;
      if (e.index !== this.appliedIndex + 1) {
        throw new Error(`apply: entry ${e.index} is not the next after applied index ${this.appliedIndex}`);
      }
      const r = this.applier.apply(e);
      this.appliedIndex = e.index;
      if (r !== undefined) this.wait.trigger(r.id, r.outcome);
      if ((i + 1) % APPLY_BATCH_MAX === 0) {
        this.notifyApplied();
        await new Promise<void>((res) => setImmediate(res));
      }
    }
    if (entries.length > 0) this.notifyApplied();
  }

  /**
   * A member that is the only voter need not wait an election timeout (etcd fast-forwards its
   * election ticks): once its configuration is applied it campaigns at once.
   */
  private campaignIfAlone(): void {
    if (this.campaignedAlone || this.leaderId !== NONE) return;
    const v = this.confState.voters;
    if (v.length === 1 && v[0] === this.memberId && this.confState.votersOutgoing.length === 0) {
      this.campaignedAlone = true;
      this.raw.campaign();
      this.schedule();
    }
  }

  private notifyApplied(): void {
    const w = this.appliedWaiters;
    if (w.length === 0) return;
    let keep = 0;
    for (const x of w) {
      if (x.index <= this.appliedIndex) x.resolve();
      else w[keep++] = x;
    }
    w.length = keep;
  }

  /** Resolves once the applied index reaches `index`. */
  waitApplied(index: number): Promise<void> {
    if (this.appliedIndex >= index) return Promise.resolve();
    return new Promise((resolve) => this.appliedWaiters.push({ index, resolve }));
  }

  private onSoftState(ss: SoftState): void {
    const wasLeader = this.raftState === StateType.Leader;
    const leaderChanged = ss.lead !== this.leaderId;
    this.raftState = ss.raftState;
    this.leaderId = ss.lead;
    const isLeader = ss.raftState === StateType.Leader;
    if (leaderChanged) {
      if (ss.lead !== NONE) this.counters.leaderChanges.inc();
      if (ss.lead === NONE) this.raftLogger.info({ term: this.raw.status().hardState.term }, "lost leader");
      else if (isLeader) this.raftLogger.info({ term: this.raw.status().hardState.term, memberId: formatId(this.memberId) }, "elected leader (this member)");
      else this.raftLogger.info({ term: this.raw.status().hardState.term, leader: formatId(ss.lead) }, "became follower of leader");
      for (const w of [...this.leaderWatchers]) w();
    }
    if (isLeader && !wasLeader) this.lessor.promote(this.config.electionMs);
    if (!isLeader && wasLeader) this.lessor.demote();
  }

  private async takeSnapshot(): Promise<void> {
    const index = this.appliedIndex;
    // The snapshot lets the WAL before `index` go: the backend must hold everything up to it.
    this.backend.forceCommit();
    await this.rs.snapshotAt(index, this.confState, new Uint8Array(0));
    this.snapshotIndex = index;
    this.logger.info({ index, term: this.term }, "saved snapshot");
  }

  private syncPeers(): void {
    if (this.transport === undefined) return;
    const want = new Map(this.membership.list().filter((m) => m.id !== this.memberId).map((m) => [m.id, m.peerUrls] as const));
    for (const id of this.transport.peerIds()) if (!want.has(id)) this.transport.removePeer(id);
    const have = new Set(this.transport.peerIds());
    for (const [id, urls] of want) if (!have.has(id)) this.transport.addPeer(id, urls);
  }

  // ------------------------------------------------------------------ proposals

  /** Proposes `req` through Raft and resolves with its outcome once applied on this member. */
  async propose(req: ProposedRequest, signal?: AbortSignal): Promise<ApplyOutcome> {
    if (this.stopped) throw Errors.stopped();
    if (this.wait.isFull() || this.committedIndex > this.appliedIndex + MAX_GAP_BETWEEN_APPLY_AND_COMMIT) {
      throw Errors.tooManyRequests();
    }
    const id = this.ids.next();
    const data = encodeRaftRequest({ ID: id, ...req });
    if (data.length > this.config.maxRequestBytes) throw Errors.requestTooLarge();
    const done = this.wait.register(id);
    this.proposals.push({ id, data });
    this.schedule();
    // Every proposal has the same timeout, so deadlines queue in order: one sweep timer, not one each.
    this.deadlines.push({ id, atMs: performance.now() + this.requestTimeoutMs });
    if (signal === undefined) return done;
    const onAbort = () => this.failProposal(id, Errors.timeout());
    signal.addEventListener("abort", onAbort, { once: true });
    try {
      return await done;
    } finally {
      signal.removeEventListener("abort", onAbort);
    }
  }

  private failProposal(id: number, err: Error): void {
    if (this.wait.fail(id, err)) this.counters.proposalsFailed.inc();
  }

  /** Fails the proposals whose request timeout passed (etcd's "request timed out"). */
  private sweepDeadlines(): void {
    const now = performance.now();
    const d = this.deadlines;
    let i = this.deadlineHead;
    while (i < d.length && d[i]!.atMs <= now) {
      const { id } = d[i++]!;
      if (this.wait.has(id)) this.failProposal(id, this.leaderId === NONE ? Errors.timeoutDueToLeaderFail() : Errors.timeout());
    }
    this.deadlineHead = i;
    if (i > 1024 && i * 2 > d.length) {
      d.splice(0, i);
      this.deadlineHead = 0;
    }
  }

  /** Proposes and unwraps: throws the applied error, returns the response and revision. */
  async proposeAndApply<T>(req: ProposedRequest, signal?: AbortSignal): Promise<{ response: T; revision: number; done?: Promise<void> }> {
    const o = await this.propose(req, signal);
    if (o.error) throw o.error;
    return { response: o.response as T, revision: o.revision, done: o.done };
  }

  // ------------------------------------------------------------------ linearizable reads

  /** Resolves when this member has applied everything committed before the call (ReadIndex). */
  linearizableReadNotify(): Promise<void> {
    if (this.stopped) return Promise.reject(Errors.stopped());
    if (this.readPending.length >= MAX_PENDING_READS) return Promise.reject(Errors.tooManyRequests());
    return new Promise((resolve, reject) => {
      this.readPending.push({ resolve, reject });
      if (this.readRound === undefined) this.startReadRound();
    });
  }

  private startReadRound(): void {
    if (this.readPending.length === 0 || this.readRound !== undefined) return;
    const waiters = this.readPending;
    this.readPending = [];
    const ctx = Buffer.alloc(8);
    ctx.writeUInt32BE(this.readSeq++ >>> 0, 4);
    ctx.writeUInt32BE(this.memberId % 0x100000000, 0);
    const round: ReadRound = {
      ctxKey: ctx.toString("hex"),
      ctx,
      waiters,
      retry: setInterval(() => this.requestReadIndex(ctx), READ_INDEX_RETRY_MS),
      deadline: setTimeout(() => this.finishReadRound(round, Errors.timeout()), this.requestTimeoutMs),
    };
    this.readRound = round;
    this.requestReadIndex(ctx);
  }

  private requestReadIndex(ctx: Buffer): void {
    try {
      this.raw.readIndex(ctx);
    } catch (err) {
      // No leader yet: the retry timer asks again, the round's deadline bounds the wait.
      if (!(err instanceof ProposalDroppedError)) throw err;
      return;
    }
    this.schedule();
  }

  private onReadStates(states: ReadState[]): void {
    const round = this.readRound;
    if (round === undefined) return;
    for (const rs of states) {
      if (Buffer.from(rs.requestCtx).toString("hex") !== round.ctxKey) continue;
      void this.waitApplied(rs.index).then(() => this.finishReadRound(round, undefined));
      // The round is answered: the next batch may start its quorum round now.
      clearInterval(round.retry);
      this.readRound = undefined;
      this.startReadRound();
      return;
    }
  }

  private finishReadRound(round: ReadRound, err: Error | undefined): void {
    clearInterval(round.retry);
    clearTimeout(round.deadline);
    if (this.readRound === round) {
      this.readRound = undefined;
      this.startReadRound();
    }
    const ws = round.waiters.splice(0);
    if (err) this.counters.readIndexesFailed.inc();
    for (const w of ws) {
      if (err) w.reject(err);
      else w.resolve();
    }
  }

  // ------------------------------------------------------------------ leases

  private revokeExpiredLeases(): void {
    if (!this.isLeader()) return;
    for (const id of this.lessor.expiredLeases()) {
      this.propose({ leaseRevoke: { ID: id } }).catch((err: unknown) => {
        this.logger.debug({ leaseId: id.toString(16), err: String(err) }, "failed to revoke expired lease");
      });
    }
  }

  // ------------------------------------------------------------------ membership publication

  private async publish(): Promise<void> {
    const local = this.initialMembers.get(this.memberId)!;
    while (!this.stopped && !this.published) {
      try {
        await this.proposeAndApply({ memberAttributes: { member_ID: this.memberId, name: this.config.name, clientUrls: [...this.config.advertiseClientUrls] } });
        this.published = true;
        this.logger.info({ name: local.name, clientUrls: this.config.advertiseClientUrls, clusterId: formatId(this.clusterId) }, "published local member to cluster through raft");
        this.readyResolve();
      } catch (err) {
        this.logger.debug({ err: String(err) }, "publish failed; retrying");
        await new Promise((r) => setTimeout(r, Math.min(500, this.config.heartbeatMs * 2)));
      }
    }
  }

  // ------------------------------------------------------------------ status

  isLeader(): boolean {
    return this.raftState === StateType.Leader;
  }
  leader(): NodeId {
    return this.leaderId;
  }
  raftTerm(): number {
    return this.term;
  }
  raftIndex(): number {
    return this.committedIndex;
  }
  raftAppliedIndex(): number {
    return this.appliedIndex;
  }
  isLearner(): boolean {
    return this.confState.learners.includes(this.memberId);
  }

  /** Resolves on the next leader change (or after `timeoutMs`). */
  waitLeaderChange(timeoutMs: number): Promise<void> {
    return new Promise((resolve) => {
      const done = () => {
        clearTimeout(t);
        this.leaderWatchers.delete(done);
        resolve();
      };
      const t = setTimeout(done, timeoutMs);
      this.leaderWatchers.add(done);
    });
  }

  /** etcd's MoveLeader: only the leader transfers, to a voter, within the election timeout. */
  async moveLeader(transferee: NodeId): Promise<void> {
    if (!this.isLeader()) throw Errors.notLeader();
    // Moving leadership to the current leader is done already (etcd answers OK).
    if (transferee === this.memberId) return;
    if (!this.confState.voters.includes(transferee)) throw Errors.badLeaderTransferee();
    const from = this.memberId;
    this.raw.transferLeader(transferee);
    this.schedule();
    const deadline = Date.now() + this.config.electionMs * 2 + this.config.heartbeatMs * 10;
    while (this.leaderId !== transferee) {
      const left = deadline - Date.now();
      if (left <= 0) throw Errors.timeoutDueToLeaderFail();
      await this.waitLeaderChange(left);
    }
    this.logger.info({ from: formatId(from), to: formatId(transferee) }, "leadership transferred");
  }

  raftStatus() {
    return this.raw.status();
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.tickTimer);
    clearInterval(this.leaseTimer);
    clearInterval(this.deadlineTimer);
    this.wait.failAll(Errors.stopped);
    if (this.readRound) this.finishReadRound(this.readRound, Errors.stopped());
    for (const w of this.readPending.splice(0)) w.reject(Errors.stopped());
    while (this.loopRunning) await new Promise((r) => setTimeout(r, 5));
    await this.transport.stop();
    await this.rs.close();
    this.watchable.close();
    this.kv.close();
    this.backend.close();
  }
}
