/**
 * One etcd member (etcd's etcdserver.EtcdServer): opens the backend and its stores, the WAL and
 * the peer transport, and wires the member's concerns, each in its own file:
 *   raft_loop.ts    the Ready loop: persist, send, apply, snapshot
 *   proposals.ts    requests in flight: batching into raft, deadlines, too many requests
 *   read_index.ts   linearizable reads: ReadIndex rounds, retry, deadline
 *   snapshots.ts    backend snapshots: take, send, stage, install, client images
 *   lease_expiry.ts revoking expired leases on the leader
 *   publish.ts      publishing this member's attributes
 *   apply.ts        the applier: each committed entry to the store it concerns
 *   v3_api.ts       the v3 API the handlers see (v3_server.ts): each request sequenced there
 *
 * Data flows one way: a handler proposes → the proposal batch enters raft at the next turn →
 * each Ready is persisted (one fdatasync), its messages sent, its committed entries applied →
 * the applier wakes the handler waiting on the request id.
 */
import { peerTransportTls } from "./tls/peer_tls.js";
import { leaderClientTls } from "./tls/leader_tls.js";
import { mkdirSync } from "node:fs";
import { join } from "node:path";
import { performance } from "node:perf_hooks";
import { Counter, type Registry } from "prom-client";
import { PasswordHasher } from "../auth/password.js";
import { newTokenProvider } from "../auth/providers.js";
import { AuthStore } from "../auth/store.js";
import type { TokenProvider } from "../auth/token.js";
import { Backend } from "../backend/backend.js";
import { Lessor } from "../lease/lessor.js";
import { minLeaseTtlSec } from "../lease/ttl.js";
import { KvStore } from "../mvcc/kvstore.js";
import { WatchableStore } from "../mvcc/watchable_store.js";
import { RawNode } from "../raft/index.js";
import type { Status } from "../raft/rawnode.js";
import { readWalMetadata } from "../wal/index.js";
import { EntryType, NONE, type NodeId } from "../raft/types.js";
import { ErrCompacted } from "../mvcc/errors.js";
import { Alarms } from "./alarms.js";
import { Applier } from "./apply.js";
import { memberCompactable, newCompactor, type Compactor } from "./compactor/index.js";
import { ETCD_API_VERSION, type ServerConfig } from "./config.js";
import { CorruptionCheck } from "./corrupt/corruption.js";
import { defragment } from "./defrag.js";
import { forceNewCluster } from "./force_new_cluster.js";
import { importEtcdDataDirIfPresent } from "../etcd_format/import/etcd_import.js";
import { parseGoDurationMs } from "./flags.js";
import { IdGenerator } from "./id_gen.js";
import { LeaseCheckpoints } from "./lease_checkpoints.js";
import { LeaseExpiry } from "./lease_expiry.js";
import { componentLogger, type Logger } from "./logger.js";
import { HeartbeatWatch } from "./heartbeat_watch.js";
import { gauge } from "../mvcc/metrics.js";
import { LeaderClient } from "./leader_client.js";
import { encodeConfChangeContext } from "./conf_change_context.js";
import { Errors } from "./errors.js";
import { bootstrapNewMember, joinExistingCluster, type Identity } from "./join.js";
import { initialClusterInfo, formatId, type Member } from "./member.js";
import { Reconfigure } from "./reconfigure.js";
import { Membership } from "./membership.js";
import { backendTimings, snapshotDbTimings } from "./disk_metrics.js";
import { checkHealth, type HealthResult } from "./health.js";
import { registerServerMetrics, type ServerCounters } from "./metrics.js";
import { Proposals } from "./proposals.js";
import { publish } from "./publish.js";
import { RaftLoop } from "./raft_loop.js";
import { RaftStorage } from "./raft_storage.js";
import { ReadIndex } from "./read_index.js";
import { walSegmentSizeOption } from "./wal_segment_size.js";
import { readGateWithBugs, testDeltaPageDelayMs, type TestBug } from "./test_bugs.js";
import { Snapshots } from "./snapshots.js";
import { PAGE_ROWS as DELTA_PAGE_ROWS } from "./snapshot_delta.js";
import { Transport } from "./transport/transport.js";
import { V3Api } from "./v3_api.js";
import { COMMIT_HOLD_MS_DEFAULT, CommitHold, commitHoldMsFromEnv } from "./commit_hold.js";
import type { V3Server } from "./v3_server.js";
import { WaitTime } from "./wait_time.js";
import { ExpensiveRequests } from "./expensive_requests.js";

/** How often proposals past their deadline are failed. */
const DEADLINE_SWEEP_MS = 100;

export interface EtcdServerOptions {
  config: ServerConfig;
  logger: Logger;
  registry: Registry;
  /** Called when the node cannot continue safely (storage failure); the process must exit. */
  onFatal(err: Error): void;
  /** TEST-ONLY bugs to plant (src/server/test_bugs.ts); none in a real member. */
  testBugs?: ReadonlySet<TestBug>;
  /** The cluster removed this member: it has stopped serving (etcd's process then exits 0). */
  onRemoved?(reason: string): void;
}

export class EtcdServer {
  readonly memberId: NodeId;
  readonly clusterId: NodeId;
  readonly config: ServerConfig;
  /** The one database every store below lives in; this server opens, commits and restores it. */
  readonly backend: Backend;
  readonly kv: KvStore;
  /** Watchers over `kv`: every applied revision's events reach them in the same turn. */
  readonly watchable: WatchableStore;
  readonly lessor: Lessor;
  readonly membership: Membership;
  /** Snapshots installed since start (publish.ts: a publication a snapshot overtook). */
  private snapshotsInstalled = 0;
  readonly alarms: Alarms;
  /** Users, roles, permissions (src/auth), and the tokens that stand for them. */
  readonly auth: AuthStore;
  readonly tokens: TokenProvider;
  readonly passwords: PasswordHasher;
  /** How long a proposal or a read waits (etcd: 5 s + 2 election timeouts). */
  private readonly requestTimeoutMs: number;
  /** Resolves once this member has published itself and serves clients (etcd's ReadyNotify). */
  readonly ready: Promise<void>;
  /** What the API handlers see of the member (set once started). */
  get v3(): V3Server {
    return this.api;
  }

  private readonly rootLogger: Logger;
  private readonly logger: Logger;
  private readonly initialMembers: Map<NodeId, Member>;
  /** The --initial-cluster peers of a new member whose conf change has not been applied yet. */
  private readonly bootstrapPeers = new Map<NodeId, readonly string[]>();
  private readonly applyWait = new WaitTime();
  /** Keep-alives and time-to-live of a follower go to the leader's lessor through it. */
  private readonly leaderClient: LeaderClient;
  private readyResolve!: () => void;
  private raw!: RawNode;
  private rs!: RaftStorage;
  private transport!: Transport;
  private loop!: RaftLoop;
  private commitHold!: CommitHold;
  private proposals!: Proposals;
  private readIndex!: ReadIndex;
  private snapshots!: Snapshots;
  private leaseExpiry!: LeaseExpiry;
  private leaseCheckpoints!: LeaseCheckpoints;
  private corruption!: CorruptionCheck;
  private api!: V3Api;
  /** --auto-compaction-*: runs paused, resumed while this member leads. */
  private compactor: Compactor | undefined;
  private counters!: ServerCounters;
  private expensive!: ExpensiveRequests;
  private tickTimer: NodeJS.Timeout | undefined;
  private deadlineTimer: NodeJS.Timeout | undefined;
  private stopped = false;
  private removing = false;
  private onRemoved: ((reason: string) => void) | undefined;

  private constructor(o: EtcdServerOptions, identity: Identity) {
    this.config = o.config;
    this.rootLogger = o.logger;
    this.logger = componentLogger(o.logger, "etcdserver");
    this.memberId = identity.memberId;
    this.clusterId = identity.clusterId;
    this.initialMembers = new Map(identity.members.map((m) => [m.id, m]));
    this.requestTimeoutMs = 5000 + 2 * o.config.electionMs;
    this.leaderClient = new LeaderClient(this.requestTimeoutMs, leaderClientTls(o.config.tls.client, o.config.dataDir));
    this.ready = new Promise((r) => (this.readyResolve = r));

    mkdirSync(o.config.snapDir, { recursive: true });
    mkdirSync(join(o.config.dataDir, "member"), { recursive: true });
    this.backend = Backend.open(join(o.config.snapDir, "db"), {
      batchIntervalMs: o.config.backendBatchIntervalMs,
      batchLimit: o.config.backendBatchLimit,
      onIncompleteCheckpoint: (message) => this.logger.warn({}, message),
      onWalCheckpoint: (e) => {
        const fields = { "wal-size-bytes": e.walBytes, frames: e.frames, "took-ms": Number(e.tookMs.toFixed(1)) };
        if (e.complete) this.logger.info(fields, "checkpointed the backend's -wal past its size limit between two batches; the next batch starts it over");
        else this.logger.debug(fields, "the backend's -wal is past its size limit and a reader still holds its frames");
      },
      timings: backendTimings(o.registry),
    });
    // Stores recover from a snapshot in the order they register, as etcd's: lease, mvcc, alarms, auth, members.
    this.lessor = new Lessor({
      backend: this.backend,
      now: () => performance.now(),
      memberId: this.memberId,
      idSeedMs: Date.now(),
      minLeaseTtlSec: minLeaseTtlSec(Math.round(o.config.electionMs / o.config.heartbeatMs), o.config.heartbeatMs),
      checkpointing: o.config.ops.leaseCheckpoint,
      checkpointIntervalMs: o.config.ops.leaseCheckpointIntervalMs,
      registry: o.registry,
    });
    this.kv = KvStore.open({ backend: this.backend, leases: this.lessor, compactionBatchKeys: o.config.compactionBatchLimit });
    this.lessor.setRangeDeleter(this.kv);
    this.watchable = new WatchableStore(this.kv, { progressNotifyIntervalMs: o.config.watchProgressNotifyIntervalMs });
    this.alarms = new Alarms(this.backend);
    this.tokens = newTokenProvider(o.config.auth.token, {
      simpleTtlMs: o.config.auth.tokenTtlSec * 1000,
      now: () => performance.now(),
      waitApplied: (index, signal) => waitOrAbort(this.applyWait.wait(index), signal),
      parseDurationMs: parseGoDurationMs,
    });
    const authLogger = componentLogger(o.logger, "auth");
    this.auth = new AuthStore({ backend: this.backend, tokens: this.tokens, log: (msg, fields) => authLogger.info(fields, msg) });
    // etcd's currentAuthRevision, as the snapshot writes it (etcd_snapshot.ts: an untouched store is etcd's 1).
    gauge(o.registry, "etcd_debugging_auth_revision", "The current revision of auth store.", () => Math.max(1, this.auth.revision()));
    this.passwords = new PasswordHasher({ cost: o.config.auth.bcryptCost });
    this.membership = new Membership(this.backend, this.clusterId);
  }

  static async start(o: EtcdServerOptions): Promise<EtcdServer> {
    // A data dir etcd made (etcdctl snapshot restore, a stopped etcd member) becomes etcetera's first.
    await importEtcdDataDirIfPresent(o.config, componentLogger(o.logger, "etcd-import"));
    const s = new EtcdServer(o, await EtcdServer.identity(o));
    await s.startRaft(o);
    return s;
  }

  /** This member's and its cluster's ids: from the WAL on a restart, else from the peers or the flags (join.ts). */
  private static async identity(o: EtcdServerOptions): Promise<Identity> {
    const logger = componentLogger(o.logger, "etcdserver");
    const wal = await readWalMetadata(o.config.walDir);
    if (wal !== undefined) {
      const members = initialClusterInfoOrNone(o.config);
      return { memberId: wal.memberId, clusterId: wal.clusterId, members };
    }
    return o.config.initialClusterState === "existing" ? joinExistingCluster(o.config, logger) : bootstrapNewMember(o.config, logger);
  }

  private async startRaft(o: EtcdServerOptions): Promise<void> {
    const testBugs = o.testBugs ?? new Set<TestBug>();
    const c = this.config;
    const registry = o.registry;
    const raftLogger = componentLogger(this.rootLogger, "raft");
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
      unsafeNoSync: testBugs.has("wal-no-sync"),
      segmentSizeBytes: walSegmentSizeOption(process.env, this.logger),
    });
    this.rs = storage;
    if (!existed && this.kv.consistentIndex() > 0) {
      throw new Error(`${join(c.snapDir, "db")} holds data applied up to index ${this.kv.consistentIndex()} but ${c.walDir} has no WAL: refusing to start`);
    }
    this.snapshots = new Snapshots({
      backend: this.backend,
      snapDir: c.snapDir,
      storage,
      consistentIndex: () => this.kv.consistentIndex(),
      logger: this.logger,
      registry,
      timings: snapshotDbTimings(registry),
      delta: {
        base: () => this.kv.deltaBase(),
        keep: (rev) => this.kv.index.keep(rev),
        // Pages as small as the delta's own (snapshot_delta.ts PAGE_ROWS): hashKVAsync's 10,000 rows of large values would be a long turn.
        hashAt: (rev, compactRev) => this.kv.hashAtCompaction(rev, compactRev, DELTA_PAGE_ROWS),
      },
      testDeltaPageDelayMs: testDeltaPageDelayMs(process.env),
    });
    if (snapshot !== undefined) await this.snapshots.recoverAtStart(snapshot);
    if (existed && c.ops.forceNewCluster) {
      await forceNewCluster({ storage, memberId: this.memberId, self: this.initialMembers.get(this.memberId), logger: this.logger });
    }

    this.raw = new RawNode({
      id: this.memberId,
      electionTick: Math.max(1, Math.round(c.electionMs / c.heartbeatMs)),
      heartbeatTick: 1,
      storage: storage.memory,
      applied: Math.max(snapshot?.metadata.index ?? 0, 0),
      maxSizePerMsg: 1024 * 1024,
      maxInflightMsgs: 4096 / 8,
      checkQuorum: true,
      preVote: c.preVote,
      random: Math.random,
      logger: {
        debug: (m) => raftLogger.debug(m),
        info: (m) => raftLogger.info(m),
        warn: (m) => raftLogger.warn(m),
      },
    });
    if (!existed && c.initialClusterState === "existing") {
      // No bootstrap: the configuration (and data) come from the leader, by log or snapshot.
      this.logger.info({ memberId: formatId(this.memberId), clusterId: formatId(this.clusterId) }, "starting a member that joins an existing cluster");
    } else if (!existed) {
      this.logger.info({ memberId: formatId(this.memberId), clusterId: formatId(this.clusterId), initialCluster: c.initialClusterText }, "starting a new member of a new cluster");
      const contexts = new Map([...this.initialMembers.values()].map((m) => [m.id, encodeConfChangeContext({ requestId: 0, member: m, isPromote: false })] as const));
      this.raw.bootstrap([...this.initialMembers.keys()], contexts);
    }

    const counters = (this.counters = registerServerMetrics(
      registry,
      {
        hasLeader: () => this.leader() !== NONE,
        isLeader: () => this.isLeader(),
        isLearner: () => this.isLearner(),
        committedIndex: () => this.raftIndex(),
        appliedIndex: () => this.raftAppliedIndex(),
        pendingProposals: () => this.proposals.size,
        applyingSnapshot: () => this.snapshots.installing,
      },
      { memberIdHex: this.memberId.toString(16), version: ETCD_API_VERSION, quotaBackendBytes: c.quotaBackendBytes ?? 0 },
    ));
    const wake = () => this.loop.schedule();
    this.proposals = new Proposals({
      ids: new IdGenerator(this.memberId, Date.now()),
      maxRequestBytes: c.maxRequestBytes,
      requestTimeoutMs: this.requestTimeoutMs,
      now: () => performance.now(),
      state: { committedIndex: () => this.raftIndex(), appliedIndex: () => this.raftAppliedIndex(), hasLeader: () => this.leader() !== NONE },
      wake,
      failed: counters.proposalsFailed,
    });
    this.readIndex = new ReadIndex({
      memberId: this.memberId,
      requestTimeoutMs: this.requestTimeoutMs,
      readIndex: (ctx) => this.raw.readIndex(ctx),
      wake,
      waitApplied: (index) => this.applyWait.wait(index),
      failed: counters.readIndexesFailed,
      slow: counters.slowReadIndexes,
    });
    const applier = new Applier({
      kv: this.kv,
      lessor: this.lessor,
      membership: this.membership,
      alarms: this.alarms,
      auth: this.auth,
      tokens: this.tokens,
      logger: this.logger,
      initialMembers: this.initialMembers,
      applyConfChange: (cc) => this.loop.applyConfChange(cc),
      onMembershipChange: () => this.onMembershipChange(),
    });
    const heartbeats = new HeartbeatWatch({ registry, heartbeatMs: c.heartbeatMs, logger: this.logger });
    const expensive = (this.expensive = new ExpensiveRequests({
      logger: this.logger,
      thresholdMs: c.warningApplyDurationMs,
      slowApply: counters.slowApply,
      fullHeader: (revision) => ({ clusterId: this.clusterId, memberId: this.memberId, revision, raftTerm: this.loop.raftTerm() }),
    }));
    const hold = commitHoldMsFromEnv(process.env);
    this.commitHold = new CommitHold(typeof hold === "number" ? hold : COMMIT_HOLD_MS_DEFAULT, (msgs) => {
      heartbeats.observe(msgs);
      this.transport.send(msgs);
    });
    this.loop = new RaftLoop({
      memberId: this.memberId,
      raw: this.raw,
      storage,
      send: (msgs) => this.commitHold.send(msgs),
      sendSnapshot: (m, body) => this.transport.sendSnapshot(m, body),
      snapshotBase: (to) => this.transport.snapshotBase(to),
      apply: (e) => {
        const startMs = performance.now();
        const applied = applier.apply(e);
        // etcd's warnOfExpensiveRequest: an entry whose apply took too long is logged and counted.
        if (e.type === EntryType.Normal) expensive.applied(performance.now() - startMs, e.data, applied?.outcome);
        return applied;
      },
      proposals: this.proposals,
      readIndex: this.readIndex,
      applyWait: this.applyWait,
      snapshots: this.snapshots,
      snapshotCount: c.snapshotCount,
      // etcd's MoveLeader waits up to an election timeout; here also a few heartbeats more.
      transferTimeoutMs: c.electionMs * 2 + c.heartbeatMs * 10,
      snapshotIndex: snapshot?.metadata.index ?? 0,
      confState: snapshot?.metadata.confState ?? { voters: [], learners: [], votersOutgoing: [], learnersNext: [], autoLeave: false },
      onLeadership: (isLeader) => {
        // A deposed leader's held commit notices go out now (raft would have sent them already).
        if (!isLeader) this.commitHold.flush();
        if (isLeader) heartbeats.reset();
        if (isLeader) this.lessor.promote(c.electionMs);
        else this.lessor.demote();
        if (isLeader) this.compactor?.resume();
        else this.compactor?.pause();
      },
      onLeaderChange: (lead) => {
        if (lead === NONE) return;
        counters.leaderChanges.inc();
        // Proposals held for want of a leader go to raft in the loop's next round, not a tick later.
        if (this.proposals.held > 0) this.loop.schedule();
      },
      onSnapshotInstalled: () => {
        this.snapshotsInstalled++;
        this.onMembershipChange();
      },
      onFatal: (err) => {
        this.stopped = true;
        o.onFatal(err);
      },
      logger: this.logger,
      raftLogger,
    });
    this.leaseExpiry = new LeaseExpiry({
      isLeader: () => this.isLeader(),
      expiredLeases: () => this.lessor.expiredLeases(),
      propose: (req) => this.proposals.propose(req),
      logger: this.logger,
      expired: counters.leaseExpired,
    });
    this.leaseCheckpoints = new LeaseCheckpoints({
      isLeader: () => this.isLeader(),
      dueCheckpoints: (limit) => this.lessor.dueCheckpoints(limit),
      allCheckpoints: () => this.lessor.allCheckpoints(),
      propose: (req) => this.proposals.propose(req),
      logger: this.logger,
    });

    this.corruption = new CorruptionCheck({
      memberId: this.memberId,
      hashKV: () => this.kv.hashKVAsync(0),
      peers: () => this.membership.list().filter((m) => m.id !== this.memberId),
      isLeader: () => this.isLeader(),
      readBarrier: () => this.readIndex.notify(),
      raiseAlarm: async (alarm) => {
        const r = await this.proposals.propose({ alarm });
        if (r.error) throw r.error;
      },
      requestTimeoutMs: this.requestTimeoutMs,
      logger: this.logger,
    });

    const promotions = new Counter({
      name: "etcd_server_learner_promote_successes",
      help: "The total number of successful learner promotions while this member is leader.",
      registers: [registry],
    });
    this.api = new V3Api({
      memberId: this.memberId,
      clusterId: this.clusterId,
      requestTimeoutMs: this.requestTimeoutMs,
      limits: { maxTxnOps: c.maxTxnOps, maxRequestBytes: c.maxRequestBytes, quotaBackendBytes: c.quotaBackendBytes, electionMs: c.electionMs },
      raft: this.loop,
      propose: (req, signal, raw) => this.proposals.propose(req, signal, raw),
      readIndex: readGateWithBugs(this.readIndex, testBugs, () => this.loop.isLeader()),
      kv: this.kv,
      watchable: this.watchable,
      lessor: this.lessor,
      alarms: this.alarms,
      membership: this.membership,
      auth: this.auth,
      tokens: this.tokens,
      passwords: this.passwords,
      backend: this.backend,
      snapshots: this.snapshots,
      leaderClient: this.leaderClient,
      beforeLeaderTransfer: () => this.leaseCheckpoints.checkpointAll(),
      reconfigure: new Reconfigure({
        memberId: this.memberId,
        membership: this.membership,
        strictReconfigCheck: c.strictReconfigCheck,
        progress: () => (this.loop.isLeader() ? this.raw.status().progress : undefined),
        activeSince: (id) => this.transport.activeSince(id),
        proposeConfChange: (make) => this.proposals.proposeConfChange(make),
        forwardPromote: (id) => this.forwardPromote(id),
        onPromoted: () => promotions.inc(),
        logger: this.logger,
      }),
      expensive: this.expensive,
      defragment: () =>
        defragment({
          memberId: this.memberId,
          status: () => this.raw.status(),
          isActive: (id) => this.transport.activeSince(id) !== undefined,
          moveLeader: (to) => this.api.moveLeader(to),
          backend: this.backend,
          vacuum: () => this.kv.defragment(),
          logger: this.logger,
        }),
    });

    // A restart takes its peers from the membership it recovered, never from --initial-cluster
    // (etcd ignores the --initial-cluster* flags once a WAL exists: they may be stale by then).
    // A new member dials the flags' peers before their conf changes are applied.
    if (!existed) for (const m of this.initialMembers.values()) if (m.id !== this.memberId) this.bootstrapPeers.set(m.id, m.peerUrls);
    const peers = new Map<NodeId, readonly string[]>(this.bootstrapPeers);
    for (const m of this.membership.list()) if (m.id !== this.memberId) peers.set(m.id, m.peerUrls);
    this.transport = new Transport({
      localId: this.memberId,
      clusterId: this.clusterId,
      clusterToken: c.initialClusterToken,
      listenUrls: c.listenPeerUrls,
      peers,
      onMessage: (m) => this.loop.step(m),
      onUnreachable: (id) => {
        this.raw.reportUnreachable(id);
        this.loop.schedule();
      },
      onSnapshotStatus: (id, failed) => {
        this.raw.reportSnapshot(id, failed);
        this.loop.schedule();
      },
      isRemovedPeer: (id) => this.membership.isRemoved(id),
      membersInfo: () => ({
        clusterId: this.clusterId,
        members: this.membership.list().map((m) => ({ id: m.id, name: m.name, peerURLs: [...m.peerUrls], clientURLs: [...m.clientUrls], isLearner: m.isLearner })),
      }),
      onRemoved: () => this.removed("a peer refused this member: it was removed from the cluster"),
      logger: componentLogger(this.rootLogger, "rafthttp"),
      tls: peerTransportTls(c.tls.peer, c.dataDir, c.listenPeerUrls),
      registry,
      snapshotSink: (from, m, totalBytes) => this.snapshots.receive(from, m, totalBytes),
      // A member installing a snapshot has no settled base to offer: the leader sends the full image.
      snapshotBase: () => (this.snapshots.installing ? undefined : this.kv.deltaBase()),
    });
    this.onRemoved = o.onRemoved;
    await this.transport.start();
    // --initial-election-tick-advance (etcd's default): a booting member is one tick from its
    // election timeout, so a cluster without a leader elects one without waiting a whole timeout;
    // pre-vote keeps a member that still has a leader from disrupting it.
    if (c.initialElectionTickAdvance) for (let i = 1; i < Math.max(1, Math.round(c.electionMs / c.heartbeatMs)); i++) this.raw.tick();

    this.tickTimer = setInterval(() => {
      this.raw.tick();
      this.loop.schedule();
    }, c.heartbeatMs);
    this.leaseExpiry.start();
    this.leaseCheckpoints.start();
    this.corruption.start(c.ops.corruptCheckTimeMs);
    this.startAutoCompaction();
    this.deadlineTimer = setInterval(() => this.proposals.sweep(), DEADLINE_SWEEP_MS);
    this.loop.schedule();
    void publish({
      memberId: this.memberId,
      clusterId: this.clusterId,
      name: c.name,
      clientUrls: c.advertiseClientUrls,
      heartbeatMs: c.heartbeatMs,
      proposeAndApply: async (req) => {
        const r = await this.proposals.propose(req);
        if (r.error) throw r.error;
      },
      stopped: () => this.stopped,
      snapshotsInstalled: () => this.snapshotsInstalled,
      attributesApplied: () => {
        const m = this.membership.get(this.memberId);
        return m !== undefined && m.name === c.name && m.clientUrls.join(",") === c.advertiseClientUrls.join(",");
      },
      logger: this.logger,
    }).then((published) => {
      if (published) this.readyResolve();
    });
  }

  private startAutoCompaction(): void {
    if (this.config.autoCompaction === null) return;
    const store = memberCompactable({
      currentRevision: () => this.kv.currentRevision(),
      proposeCompaction: (revision) => this.proposals.propose({ compaction: { revision } }),
      isCompacted: (err) => err instanceof ErrCompacted,
    });
    this.compactor = newCompactor(this.config.autoCompaction, store, componentLogger(this.rootLogger, "compactor"));
    // Paused until this member leads (etcd resumes and pauses it on every leader change).
    if (!this.isLeader()) this.compactor.pause();
    this.compactor.run();
  }

  private onMembershipChange(): void {
    this.syncPeers();
    if (this.membership.isRemoved(this.memberId)) this.removed("this member's removal was applied");
  }

  /** --experimental-initial-corrupt-check: before serving clients; throws on a mismatch with a peer. */
  async checkInitialHashKV(): Promise<void> {
    if (this.config.ops.initialCorruptCheck) await this.corruption.initialCheck();
  }

  private syncPeers(): void {
    if (this.transport === undefined) return;
    const want = new Map(this.membership.list().filter((m) => m.id !== this.memberId && m.peerUrls.length > 0).map((m) => [m.id, m.peerUrls] as const));
    // A bootstrap peer whose own conf change is not applied yet stays (dropping it would reset
    // its stream at every earlier bootstrap conf change); once it is a member, the membership rules.
    for (const [id, urls] of this.bootstrapPeers) {
      if (want.has(id) || this.membership.isRemoved(id)) this.bootstrapPeers.delete(id);
      else want.set(id, urls);
    }
    for (const id of this.transport.peerIds()) if (!want.has(id)) this.transport.removePeer(id);
    const have = new Set(this.transport.peerIds());
    for (const [id, urls] of want) {
      if (!have.has(id)) this.transport.addPeer(id, urls);
      else if (this.transport.peerUrls(id)?.join(",") !== urls.join(",")) this.transport.updatePeer(id, urls);
    }
  }

  /**
   * The cluster removed this member (etcd's applyConfChange shouldStop, or a peer's 410 Gone): it
   * stops after 10 ticks (etcd's stopWithDelay), so the answer to a MemberRemove it serves and
   * the commit of its removal still go out, and never serves again.
   */
  private removed(why: string): void {
    if (this.removing || this.stopped) return;
    this.removing = true;
    this.logger.warn({ memberId: formatId(this.memberId), reason: why }, "the member has been permanently removed from the cluster");
    this.logger.warn({ dataDir: this.config.dataDir }, "the data-dir used by this member must be removed");
    setTimeout(() => {
      void this.stop().then(() => this.onRemoved?.("the member has been permanently removed from the cluster"));
    }, 10 * this.config.heartbeatMs);
  }

  /** A promote asked of a follower: the leader answers it. */
  private async forwardPromote(id: NodeId): Promise<Member[]> {
    const leader = this.leader();
    if (leader === NONE) throw Errors.noLeader();
    const url = this.membership.get(leader)?.clientUrls[0];
    if (url === undefined) throw Errors.leaderChanged();
    const r = await this.leaderClient.memberPromote(leader, url, id);
    return r.members.map((m) => ({ id: m.ID, name: m.name, peerUrls: m.peerURLs, clientUrls: m.clientURLs, isLearner: m.isLearner }));
  }

  // ------------------------------------------------------------------ status

  isLeader(): boolean {
    return this.loop.isLeader();
  }
  leader(): NodeId {
    return this.loop.leader();
  }
  raftTerm(): number {
    return this.loop.raftTerm();
  }
  raftIndex(): number {
    return this.loop.committed();
  }
  raftAppliedIndex(): number {
    return this.loop.applied();
  }
  isLearner(): boolean {
    return this.loop.isLearner();
  }
  raftStatus(): Status {
    return this.raw.status();
  }

  /** etcd 3.4's /health check: no alarm, a leader, and a quorum read within a second. */
  checkHealth(): Promise<HealthResult> {
    const source = { alarms: () => this.alarms.list(), leader: () => this.leader(), linearizableRead: () => this.readIndex.notify() };
    return checkHealth(source, this.counters, this.logger);
  }

  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.tickTimer);
    this.compactor?.stop();
    this.leaseExpiry.stop();
    this.leaseCheckpoints.stop();
    this.corruption.stop();
    clearInterval(this.deadlineTimer);
    this.proposals.stop();
    this.readIndex.stop();
    this.leaderClient.close();
    this.tokens.close();
    await this.loop.stop();
    this.commitHold.clear();
    await this.transport.stop();
    await this.rs.close();
    this.watchable.close();
    this.kv.close();
    this.backend.close();
    await this.backend.workersExited();
  }
}

/** The --initial-cluster members, when the flags describe this member (they may not after it joined). */
function initialClusterInfoOrNone(config: ServerConfig): Member[] {
  try {
    return [...initialClusterInfo(config).members];
  } catch {
    return [];
  }
}

/** `p`, or a rejection once `signal` aborts (a wait for an index that may never be applied here). */
function waitOrAbort(p: Promise<void>, signal: AbortSignal | undefined): Promise<void> {
  if (signal === undefined) return p;
  if (signal.aborted) return Promise.reject(signal.reason as Error);
  return new Promise((resolve, reject) => {
    const onAbort = () => reject(signal.reason as Error);
    signal.addEventListener("abort", onAbort, { once: true });
    void p.then(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    });
  });
}
