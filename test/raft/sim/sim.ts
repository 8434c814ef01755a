/**
 * A deterministic cluster simulator for the Raft core. Everything — ticks, message delivery,
 * faults, crashes — is decided by one seeded PRNG, so a seed replays exactly.
 *
 * The network drops, duplicates, delays (and thereby reorders) messages and can partition nodes
 * symmetrically or one way. A crash discards the RawNode and the state machine; only what the
 * Ready loop persisted into the node's MemoryStorage survives. Membership changes (learners,
 * promotion, removal, joint changes, demotion) and leader transfers happen during faults.
 *
 * Checked at every step: Election Safety (one leader per term), Log Matching (an index and term
 * identify one entry; periodic full prefix comparison), Leader Completeness (a new leader holds
 * every committed entry), State Machine Safety (one entry and one state hash per applied index,
 * snapshots included), monotonic persisted term and commit, linearizable ReadIndex (a read
 * returns an index ≥ everything known committed when it was issued). After the faults heal,
 * liveness: a leader emerges and a fresh proposal is applied by every member within a bound.
 */
import { RawNode, type Ready } from "../../../src/raft/rawnode.js";
import { MemoryStorage } from "../../../src/raft/storage.js";
import { confChangeFromEntry } from "../../../src/raft/confchange_codec.js";
import {
  ConfChangeTransition,
  ConfChangeType,
  EntryType,
  MessageType,
  NONE,
  ProposalDroppedError,
  StateType,
  type ConfChangeV2,
  type ConfState,
  type Entry,
  type Message,
  type NodeId,
} from "../../../src/raft/types.js";
import { prng } from "../helpers.js";

export interface SimOptions {
  seed: number;
  nodes: 3 | 5;
  /** Steps with faults, then steps to heal and check liveness. */
  faultSteps: number;
  livenessSteps: number;
  trace?: (line: string) => void;
  /**
   * TEST-ONLY: called on every RawNode the simulator starts (restarts too), to plant a bug in it
   * from outside src/raft (mutation.test.ts proves the checks catch a broken Raft).
   */
  mutate?: (raw: RawNode, id: NodeId) => void;
}

export class SimFailure extends Error {
  constructor(
    readonly seed: number,
    readonly step: number,
    message: string,
  ) {
    super(`seed ${seed} step ${step}: ${message}`);
    this.name = "SimFailure";
  }
}

interface SimNode {
  id: NodeId;
  storage: MemoryStorage;
  raw: RawNode | undefined;
  /** Volatile state machine: last applied index, hash chain, configuration. */
  applied: number;
  hash: number;
  confState: ConfState | undefined;
  lastSnapIndex: number;
  removed: boolean;
  /** Members this node saw removed: like etcd's transport, it refuses their messages. */
  removedSeen: Set<NodeId>;
  /** Persisted term/commit last seen, to check they never go back. */
  persistedTerm: number;
  persistedCommit: number;
}

interface InFlight {
  at: number;
  m: Message;
}

interface PendingRead {
  minIndex: number;
  node: NodeId;
}

const ELECTION_TICK = 10;
const HEARTBEAT_TICK = 1;

function hashStep(h: number, sig: string): number {
  let x = h ^ 0x9e3779b9;
  for (let i = 0; i < sig.length; i++) x = Math.imul(x ^ sig.charCodeAt(i), 16777619);
  return x >>> 0;
}

function bytesSig(b: Uint8Array): string {
  let s = "";
  for (let i = 0; i < b.byteLength; i++) s += String.fromCharCode(b[i]);
  return s;
}

function entrySig(e: Entry): string {
  return `${e.type}:${bytesSig(e.data)}`;
}

function encodeU32(n: number): Uint8Array {
  return Uint8Array.from([n >>> 24, (n >>> 16) & 255, (n >>> 8) & 255, n & 255]);
}

function decodeU32(b: Uint8Array): number {
  return ((b[0] << 24) | (b[1] << 16) | (b[2] << 8) | b[3]) >>> 0;
}

/** JSON.stringify replacer for traces: the simulator's node ids (small bigints) printed as numbers. */
const idsAsNumbers = (_key: string, v: unknown): unknown => (typeof v === "bigint" ? Number(v) : v);

function isMember(cs: ConfState | undefined, id: NodeId): boolean {
  if (cs === undefined) return false;
  return cs.voters.includes(id) || cs.learners.includes(id) || cs.votersOutgoing.includes(id) || cs.learnersNext.includes(id);
}

export class Simulator {
  private readonly rnd: () => number;
  private readonly nodes = new Map<NodeId, SimNode>();
  private now = 0;
  private queue: InFlight[] = [];
  /** Directed links that drop everything: "from>to". */
  private blocked = new Set<string>();
  private dropP: number;
  private dupP: number;
  private maxDelay: number;
  private readonly snapInterval: number;
  private readonly snapKeep: number;
  private readonly checkQuorum: boolean;
  private readonly preVote: boolean;
  private proposalSeq = 0;
  private readSeq = 0;
  private nextNewId: NodeId;
  private readonly pendingReads = new Map<string, PendingRead>();

  // Global knowledge for the safety checks.
  private readonly leaderOfTerm = new Map<number, NodeId>();
  private readonly entryAt = new Map<string, string>();
  private readonly appliedSig = new Map<number, string>();
  private readonly appliedTerm = new Map<number, number>();
  private readonly hashAt = new Map<number, number>();
  private maxCommitKnown = 0;
  private maxApplied = 0;
  readonly stats = { proposals: 0, applied: 0, reads: 0, readsServed: 0, crashes: 0, confChanges: 0, transfers: 0, snapshots: 0, leaders: 0 };

  constructor(private readonly opts: SimOptions) {
    this.rnd = prng(opts.seed);
    this.dropP = this.rnd() * 0.2;
    this.dupP = this.rnd() * 0.1;
    this.maxDelay = 1 + Math.floor(this.rnd() * 4);
    this.snapInterval = 10 + Math.floor(this.rnd() * 40);
    this.snapKeep = Math.floor(this.rnd() * 10);
    // The server runs with both on; the core must be safe (and live) with any combination.
    this.checkQuorum = this.rnd() < 0.7;
    this.preVote = this.rnd() < 0.7;
    const ids: NodeId[] = [];
    for (let i = 1; i <= opts.nodes; i++) ids.push(BigInt(i));
    this.nextNewId = BigInt(opts.nodes + 1);
    for (const id of ids) {
      const n = this.newNode(id);
      this.startNode(n);
      n.raw?.bootstrap(ids);
    }
  }

  private fail(msg: string): never {
    throw new SimFailure(this.opts.seed, this.now, msg);
  }

  private trace(line: string): void {
    this.opts.trace?.(`[${this.now}] ${line}`);
  }

  private int(n: number): number {
    return Math.floor(this.rnd() * n);
  }

  private pick<T>(xs: T[]): T | undefined {
    return xs.length === 0 ? undefined : xs[this.int(xs.length)];
  }

  private newNode(id: NodeId): SimNode {
    const n: SimNode = {
      id,
      storage: new MemoryStorage(),
      raw: undefined,
      applied: 0,
      hash: 0,
      confState: undefined,
      lastSnapIndex: 0,
      removed: false,
      removedSeen: new Set(),
      persistedTerm: 0,
      persistedCommit: 0,
    };
    this.nodes.set(id, n);
    return n;
  }

  /** (Re)start from what is on "disk": the snapshot rebuilds the state machine. */
  private startNode(n: SimNode): void {
    const snap = n.storage.snapshot();
    n.applied = snap.metadata.index;
    n.hash = snap.metadata.index > 0 ? decodeU32(snap.data) : 0;
    n.confState = snap.metadata.index > 0 ? snap.metadata.confState : undefined;
    n.lastSnapIndex = snap.metadata.index;
    n.raw = new RawNode({
      id: n.id,
      electionTick: ELECTION_TICK,
      heartbeatTick: HEARTBEAT_TICK,
      storage: n.storage,
      // The state machine restarts from the snapshot, which may be ahead of the compaction point.
      applied: snap.metadata.index,
      checkQuorum: this.checkQuorum,
      preVote: this.preVote,
      // Sometimes one entry per message: partial acknowledgements exercise the commit rule.
      maxSizePerMsg: this.rnd() < 0.3 ? 1 : 64 + this.int(512),
      maxInflightMsgs: 1 + this.int(8),
      maxInflightBytes: this.rnd() < 0.5 ? 0 : 256 + this.int(1024),
      random: this.rnd,
    });
    this.opts.mutate?.(n.raw, n.id);
  }

  private live(): SimNode[] {
    return [...this.nodes.values()].filter((n) => n.raw !== undefined);
  }

  private leaderNode(): SimNode | undefined {
    let best: SimNode | undefined;
    for (const n of this.live()) {
      const r = n.raw?.raft;
      if (r !== undefined && r.state === StateType.Leader && (best === undefined || r.term > (best.raw?.raft.term ?? 0))) best = n;
    }
    return best;
  }

  // ------------------------------------------------------------------ network

  private send(m: Message): void {
    if (this.rnd() < this.dropP) {
      this.onDropped(m);
      return;
    }
    this.queue.push({ at: this.now + this.int(this.maxDelay + 1), m });
    if (this.rnd() < this.dupP) this.queue.push({ at: this.now + this.int(this.maxDelay + 1), m });
  }

  private onDropped(m: Message): void {
    const from = this.nodes.get(m.from)?.raw;
    if (from === undefined) return;
    if (m.type === MessageType.MsgSnap) from.reportSnapshot(m.to, true);
    else if (this.rnd() < 0.1) from.reportUnreachable(m.to);
  }

  private deliverDue(): void {
    const due: InFlight[] = [];
    const rest: InFlight[] = [];
    for (const f of this.queue) (f.at <= this.now ? due : rest).push(f);
    this.queue = rest;
    // Shuffle: same-time messages arrive in any order.
    for (let i = due.length - 1; i > 0; i--) {
      const j = this.int(i + 1);
      [due[i], due[j]] = [due[j], due[i]];
    }
    for (const { m } of due) {
      const to = this.nodes.get(m.to);
      if (to?.raw !== undefined && to.removedSeen.has(m.from) && !this.blocked.has(`${m.from}>${m.to}`)) {
        // etcd's transport answers a removed member with "member removed" and it shuts down.
        const from = this.nodes.get(m.from);
        if (from?.raw !== undefined) {
          this.trace(`node ${m.from} told by ${m.to} that it was removed; stopping`);
          from.raw = undefined;
          from.removed = true;
        }
        continue;
      }
      if (to?.raw === undefined || this.blocked.has(`${m.from}>${m.to}`)) {
        this.onDropped(m);
        continue;
      }
      to.raw.step({ ...m });
      if (m.type === MessageType.MsgSnap) this.nodes.get(m.from)?.raw?.reportSnapshot(m.to, false);
    }
  }

  // ------------------------------------------------------------------ ready loop

  private processReadys(): void {
    for (const n of this.live()) {
      // A few rounds: applying may produce more work (auto-leave of a joint config).
      for (let i = 0; i < 3 && n.raw?.hasReady(); i++) this.handleReady(n);
    }
  }

  private handleReady(n: SimNode): void {
    const raw = n.raw;
    if (raw === undefined) return;
    const rd = raw.ready();
    this.checkReady(n, rd);
    if (rd.canSendBeforePersist) {
      // The leader's optimization: messages leave before its own write completes.
      for (const m of rd.messages) this.send(m);
      if (this.rnd() < this.crashMidReadyP()) {
        this.crash(n, "before persisting its Ready (messages already sent)");
        return;
      }
      this.persist(n, rd);
    } else {
      this.persist(n, rd);
      if (this.rnd() < this.crashMidReadyP()) {
        this.crash(n, "after persisting, before sending");
        return;
      }
      for (const m of rd.messages) this.send(m);
    }
    if (rd.snapshot !== undefined) this.applySnapshot(n, rd);
    for (const e of rd.committedEntries) {
      this.apply(n, e);
      if (n.removed) return;
    }
    for (const rs of rd.readStates) this.checkReadState(n, rs.index, bytesSig(rs.requestCtx));
    raw.advance(rd);
    this.maybeSnapshot(n);
  }

  private crashMidReadyP(): number {
    return this.faulting ? 0.002 : 0;
  }

  private persist(n: SimNode, rd: Ready): void {
    if (rd.snapshot !== undefined) n.storage.applySnapshot(rd.snapshot);
    if (rd.entries.length > 0) n.storage.append(rd.entries);
    if (rd.hardState !== undefined) {
      const hs = rd.hardState;
      if (hs.term < n.persistedTerm) this.fail(`node ${n.id} persisted term went back ${n.persistedTerm} -> ${hs.term}`);
      if (hs.commit < n.persistedCommit) this.fail(`node ${n.id} persisted commit went back ${n.persistedCommit} -> ${hs.commit}`);
      n.persistedTerm = hs.term;
      n.persistedCommit = hs.commit;
      n.storage.setHardState(hs);
    }
  }

  private checkReady(n: SimNode, rd: Ready): void {
    const raft = n.raw?.raft;
    if (raft === undefined) return;
    // Election Safety.
    if (rd.softState?.raftState === StateType.Leader) {
      const prev = this.leaderOfTerm.get(raft.term);
      if (prev !== undefined && prev !== n.id) this.fail(`two leaders in term ${raft.term}: ${prev} and ${n.id}`);
      if (prev === undefined) {
        this.stats.leaders++;
        this.trace(`node ${n.id} is leader of term ${raft.term}`);
        this.checkLeaderCompleteness(n);
      }
      this.leaderOfTerm.set(raft.term, n.id);
    }
    // Log Matching, part 1: an (index, term) pair names exactly one entry, everywhere, forever.
    for (const e of rd.entries) {
      const key = `${e.index}:${e.term}`;
      const sig = entrySig(e);
      const prev = this.entryAt.get(key);
      if (prev !== undefined && prev !== sig) this.fail(`two different entries at index ${e.index} term ${e.term}`);
      this.entryAt.set(key, sig);
    }
    if (raft.raftLog.committed > this.maxCommitKnown) this.maxCommitKnown = raft.raftLog.committed;
  }

  private checkLeaderCompleteness(n: SimNode): void {
    const log = n.raw?.raft.raftLog;
    if (log === undefined) return;
    if (log.lastIndex() < this.maxApplied) this.fail(`leader ${n.id} lacks applied index ${this.maxApplied} (last ${log.lastIndex()})`);
    const lo = Math.max(log.firstIndex(), this.maxApplied - 300, 1);
    for (let i = lo; i <= this.maxApplied; i++) {
      const t = this.appliedTerm.get(i);
      if (t !== undefined && log.term(i) !== t) this.fail(`leader ${n.id} has term ${log.term(i)} at committed index ${i}, expected ${t}`);
    }
  }

  private applySnapshot(n: SimNode, rd: Ready): void {
    const s = rd.snapshot;
    if (s === undefined) return;
    const h = decodeU32(s.data);
    const known = this.hashAt.get(s.metadata.index);
    if (known !== undefined && known !== h) this.fail(`snapshot at ${s.metadata.index} has state ${h}, others applied ${known}`);
    if (s.metadata.index < n.applied) this.fail(`node ${n.id} snapshot ${s.metadata.index} behind applied ${n.applied}`);
    this.hashAt.set(s.metadata.index, h);
    n.applied = s.metadata.index;
    n.hash = h;
    n.confState = s.metadata.confState;
    n.lastSnapIndex = s.metadata.index;
  }

  private apply(n: SimNode, e: Entry): void {
    if (e.index !== n.applied + 1) this.fail(`node ${n.id} applies ${e.index} after ${n.applied}`);
    const sig = entrySig(e);
    // State Machine Safety: one entry per index, one state per index.
    const prev = this.appliedSig.get(e.index);
    if (prev !== undefined && prev !== sig) this.fail(`node ${n.id} applied a different entry at ${e.index}`);
    this.appliedSig.set(e.index, sig);
    this.appliedTerm.set(e.index, e.term);
    n.hash = hashStep(n.hash, sig);
    const h = this.hashAt.get(e.index);
    if (h !== undefined && h !== n.hash) this.fail(`node ${n.id} state diverged at ${e.index}`);
    this.hashAt.set(e.index, n.hash);
    n.applied = e.index;
    if (e.index > this.maxApplied) this.maxApplied = e.index;
    this.stats.applied++;
    if (e.type !== EntryType.Normal) {
      const cc = confChangeFromEntry(e);
      const before = n.confState;
      n.confState = n.raw?.applyConfChange(cc);
      this.trace(`node ${n.id} applied conf change at ${e.index}: ${JSON.stringify(n.confState, idsAsNumbers)}`);
      const wasMember = isMember(before, n.id);
      for (const c of cc.changes) if (isMember(before, c.nodeId) && !isMember(n.confState, c.nodeId)) n.removedSeen.add(c.nodeId);
      for (const id of before?.votersOutgoing ?? []) if (!isMember(n.confState, id)) n.removedSeen.add(id);
      // Snapshot soon so that a member added now can catch up from a snapshot that includes it.
      n.lastSnapIndex = Math.min(n.lastSnapIndex, n.applied - this.snapInterval);
      if (wasMember && !isMember(n.confState, n.id)) {
        // As etcd's server does: a member that applies its own removal shuts down for good.
        this.trace(`node ${n.id} removed; stopping`);
        n.removed = true;
        n.raw = undefined;
      }
    }
  }

  private checkReadState(n: SimNode, index: number, ctx: string): void {
    const pr = this.pendingReads.get(ctx);
    if (pr === undefined) return; // a duplicate response
    this.pendingReads.delete(ctx);
    this.stats.readsServed++;
    if (pr.node !== n.id) this.fail(`read ${ctx} answered on node ${n.id}, issued on ${pr.node}`);
    if (index < pr.minIndex) this.fail(`read ${ctx} got index ${index} < ${pr.minIndex} committed before it was issued (stale read)`);
  }

  /** etcd's snapshot-count: snapshot the state machine and compact the log behind it. */
  private maybeSnapshot(n: SimNode): void {
    if (n.raw === undefined || n.applied - n.lastSnapIndex < this.snapInterval) return;
    n.storage.createSnapshot(n.applied, n.confState, encodeU32(n.hash));
    n.lastSnapIndex = n.applied;
    const compactTo = n.applied - this.snapKeep;
    if (compactTo > n.storage.firstIndex()) n.storage.compact(compactTo);
    this.stats.snapshots++;
  }

  private crash(n: SimNode, why: string): void {
    this.trace(`crash node ${n.id} ${why}`);
    n.raw = undefined;
    this.stats.crashes++;
  }

  // ------------------------------------------------------------------ client actions and faults

  private faulting = true;

  private propose(): void {
    const n = this.pick(this.live());
    if (n?.raw === undefined) return;
    const count = this.rnd() < 0.3 ? 1 + this.int(5) : 1;
    const data: Uint8Array[] = [];
    for (let i = 0; i < count; i++) {
      const s = `p${++this.proposalSeq}`;
      data.push(Uint8Array.from([...s].map((c) => c.charCodeAt(0))));
    }
    try {
      if (count === 1) n.raw.propose(data[0]);
      else n.raw.proposeBatch(data);
      this.stats.proposals += count;
    } catch (e) {
      if (!(e instanceof ProposalDroppedError)) throw e;
    }
  }

  private read(): void {
    const n = this.pick(this.live());
    if (n?.raw === undefined) return;
    const ctx = `r${++this.readSeq}`;
    try {
      n.raw.readIndex(Uint8Array.from([...ctx].map((c) => c.charCodeAt(0))));
      // Everything known committed now must be visible to this read.
      let known = this.maxCommitKnown;
      for (const x of this.live()) known = Math.max(known, x.raw?.raft.raftLog.committed ?? 0);
      this.pendingReads.set(ctx, { minIndex: known, node: n.id });
      this.stats.reads++;
    } catch (e) {
      if (!(e instanceof ProposalDroppedError)) throw e;
    }
  }

  private confChange(): void {
    const l = this.leaderNode();
    const raw = l?.raw;
    if (raw === undefined) return;
    const cs = raw.raft.prs.confState();
    const cc = this.pickConfChange(cs);
    if (cc === undefined) return;
    try {
      raw.proposeConfChange(cc);
      this.stats.confChanges++;
      this.trace(`leader ${raw.raft.id} proposes ${JSON.stringify(cc.changes, idsAsNumbers)} transition ${cc.transition}`);
      for (const c of cc.changes) {
        if (!this.nodes.has(c.nodeId)) this.startNode(this.newNode(c.nodeId));
      }
    } catch (e) {
      if (!(e instanceof ProposalDroppedError)) throw e;
    }
  }

  private pickConfChange(cs: ConfState): ConfChangeV2 | undefined {
    const ctx = new Uint8Array(0);
    if (cs.votersOutgoing.length > 0) {
      return cs.autoLeave ? undefined : { transition: ConfChangeTransition.Auto, changes: [], context: ctx };
    }
    const single = (type: ConfChangeType, nodeId: NodeId): ConfChangeV2 => ({
      transition: this.rnd() < 0.7 ? ConfChangeTransition.Auto : ConfChangeTransition.JointExplicit,
      changes: [{ type, nodeId }],
      context: ctx,
    });
    const r = this.rnd();
    const maxId = BigInt(this.opts.nodes + 3);
    if (r < 0.3 && this.nextNewId <= maxId) return single(ConfChangeType.AddLearnerNode, this.nextNewId++);
    if (r < 0.55 && cs.learners.length > 0) {
      const id = this.pick(cs.learners);
      return id === undefined ? undefined : single(ConfChangeType.AddNode, id);
    }
    if (r < 0.75 && cs.voters.length > 3) {
      const id = this.pick(cs.voters);
      return id === undefined ? undefined : single(ConfChangeType.RemoveNode, id);
    }
    if (r < 0.9 && cs.learners.length > 0 && cs.voters.length >= 3) {
      // Replace a voter by a learner in one joint step.
      const add = this.pick(cs.learners);
      const remove = this.pick(cs.voters);
      if (add === undefined || remove === undefined) return undefined;
      return {
        transition: this.rnd() < 0.5 ? ConfChangeTransition.Auto : ConfChangeTransition.JointExplicit,
        changes: [
          { type: ConfChangeType.AddNode, nodeId: add },
          { type: ConfChangeType.RemoveNode, nodeId: remove },
        ],
        context: ctx,
      };
    }
    if (cs.voters.length > 3) {
      // Demote a voter to learner (goes through LearnersNext in a joint config).
      const id = this.pick(cs.voters);
      return id === undefined ? undefined : { transition: ConfChangeTransition.JointImplicit, changes: [{ type: ConfChangeType.AddLearnerNode, nodeId: id }], context: ctx };
    }
    return undefined;
  }

  private transfer(): void {
    const l = this.leaderNode();
    if (l?.raw === undefined) return;
    const to = this.pick(l.raw.raft.prs.config.voters.incoming.sorted());
    if (to === undefined) return;
    this.stats.transfers++;
    this.trace(`transfer leadership ${l.id} -> ${to}`);
    l.raw.transferLeader(to);
  }

  private partition(): void {
    this.blocked.clear();
    const ids = [...this.nodes.keys()];
    if (this.rnd() < 0.5) {
      // Symmetric: split into two groups.
      const side = new Map(ids.map((id) => [id, this.rnd() < 0.5]));
      for (const a of ids) for (const b of ids) if (side.get(a) !== side.get(b)) this.blocked.add(`${a}>${b}`);
      this.trace(`partition ${JSON.stringify([...side], idsAsNumbers)}`);
    } else {
      // One-way: some directed links fail.
      for (const a of ids) for (const b of ids) if (a !== b && this.rnd() < 0.25) this.blocked.add(`${a}>${b}`);
      this.trace(`one-way partition ${[...this.blocked].join(",")}`);
    }
  }

  private faultStep(): void {
    const r = this.rnd();
    if (r < 0.01) {
      const n = this.pick(this.live());
      if (n !== undefined) this.crash(n, "at random");
    } else if (r < 0.03) {
      const n = this.pick([...this.nodes.values()].filter((x) => x.raw === undefined && !x.removed));
      if (n !== undefined) {
        this.trace(`restart node ${n.id}`);
        this.startNode(n);
      }
    } else if (r < 0.04) {
      this.partition();
    } else if (r < 0.055) {
      this.blocked.clear();
    } else if (r < 0.07) {
      this.confChange();
    } else if (r < 0.075) {
      this.transfer();
    }
  }

  private clientStep(): void {
    if (this.rnd() < 0.3) this.propose();
    if (this.rnd() < 0.1) this.read();
  }

  private tickStep(): void {
    for (const n of this.live()) {
      // Uneven ticking models clock drift between nodes.
      if (this.rnd() < 0.9) n.raw?.tick();
    }
  }

  private step(): void {
    this.now++;
    this.tickStep();
    this.deliverDue();
    this.processReadys();
  }

  /** Log Matching, part 2: where two logs agree on an (index, term) they agree on every entry before. */
  private checkLogMatching(): void {
    const live = this.live();
    for (let a = 0; a < live.length; a++) {
      for (let b = a + 1; b < live.length; b++) {
        const la = live[a].raw?.raft.raftLog;
        const lb = live[b].raw?.raft.raftLog;
        if (la === undefined || lb === undefined) continue;
        const lo = Math.max(la.firstIndex(), lb.firstIndex());
        let hi = Math.min(la.lastIndex(), lb.lastIndex());
        while (hi >= lo && la.term(hi) !== lb.term(hi)) hi--;
        if (hi < lo) continue;
        const ea = la.slice(lo, hi + 1, Number.MAX_SAFE_INTEGER);
        const eb = lb.slice(lo, hi + 1, Number.MAX_SAFE_INTEGER);
        for (let i = 0; i < ea.length; i++) {
          if (ea[i].term !== eb[i].term || entrySig(ea[i]) !== entrySig(eb[i])) {
            this.fail(`log matching: nodes ${live[a].id} and ${live[b].id} agree at ${hi} but differ at ${ea[i].index}`);
          }
        }
      }
    }
  }

  run(): void {
    // Elect a first leader without faults to get going (campaign like a real first timeout).
    for (let i = 0; i < this.opts.faultSteps; i++) {
      this.faultStep();
      this.clientStep();
      this.step();
      if (i % 50 === 0) this.checkLogMatching();
    }
    this.heal();
    this.checkLiveness();
    this.checkLogMatching();
  }

  private heal(): void {
    this.faulting = false;
    this.blocked.clear();
    this.dropP = 0;
    this.dupP = 0;
    this.maxDelay = 1;
    for (const n of this.nodes.values()) {
      if (n.raw === undefined && !n.removed) {
        this.trace(`heal: restart node ${n.id}`);
        this.startNode(n);
      }
    }
    this.trace("healed");
  }

  private checkLiveness(): void {
    let marker: string | undefined;
    let markerAt = 0;
    for (let i = 0; i < this.opts.livenessSteps; i++) {
      this.step();
      const l = this.leaderNode();
      const raw = l?.raw;
      if (raw === undefined || raw.raft.leadTransferee !== NONE) continue;
      const cs = raw.raft.prs.confState();
      if (cs.votersOutgoing.length > 0 && !cs.autoLeave) {
        try {
          raw.proposeConfChange({ transition: ConfChangeTransition.Auto, changes: [], context: new Uint8Array(0) });
        } catch (e) {
          if (!(e instanceof ProposalDroppedError)) throw e;
        }
        continue;
      }
      if (marker === undefined) {
        marker = `live${this.opts.seed}`;
        markerAt = i;
        try {
          raw.propose(Uint8Array.from([...marker].map((c) => c.charCodeAt(0))));
        } catch (e) {
          if (!(e instanceof ProposalDroppedError)) throw e;
          marker = undefined;
          continue;
        }
      }
      // Done when every member (of the leader's configuration) applied the marker.
      const members = [...cs.voters, ...cs.learners, ...cs.votersOutgoing, ...cs.learnersNext];
      const markerSig = `${EntryType.Normal}:${marker}`;
      let markerIndex = 0;
      for (const [idx, sig] of this.appliedSig) if (sig === markerSig) markerIndex = idx;
      if (markerIndex === 0) {
        // Lost with a leader change: propose again (a duplicate apply is harmless here).
        if (i - markerAt > 3 * ELECTION_TICK) marker = undefined;
        continue;
      }
      if (members.every((id) => (this.nodes.get(id)?.applied ?? 0) >= markerIndex)) return;
    }
    const desc = [...this.nodes.values()]
      .map((n) => {
        const r = n.raw?.raft;
        return r === undefined
          ? `${n.id}:${n.removed ? "removed" : "down"}`
          : `${n.id}:${StateType[r.state]} t${r.term} lead${r.lead} commit${r.raftLog.committed} applied${n.applied} last${r.raftLog.lastIndex()} conf${JSON.stringify(r.prs.confState(), idsAsNumbers)}`;
      })
      .join(" | ");
    this.fail(`no liveness within ${this.opts.livenessSteps} steps after heal: ${desc}`);
  }
}

/** Steps per seed: sized so that 500 seeds stay well under a minute on a busy 2-core machine. */
export const FAULT_STEPS = 450;
export const LIVENESS_STEPS = 400;

export function runSeed(opts: SimOptions): Simulator["stats"] {
  const sim = new Simulator(opts);
  sim.run();
  return sim.stats;
}

export function replayCommand(seed: number, nodes: number): string {
  return `SEED=${seed} NODES=${nodes} npx vitest run test/raft/sim`;
}
