import { RawNode, type RaftConfig, type Ready } from "../../src/raft/rawnode.js";
import { MemoryStorage } from "../../src/raft/storage.js";
import { confChangeFromEntry } from "../../src/raft/confchange_codec.js";
import {
  EntryType,
  MessageType,
  StateType,
  type ConfState,
  type Entry,
  type Message,
  type NodeId,
} from "../../src/raft/types.js";
import { mulberry32 } from "../prng.js";

/** mulberry32 (test/prng.ts). */
export const prng = mulberry32;

export const enc = (s: string): Uint8Array => new TextEncoder().encode(s);
export const dec = (b: Uint8Array): string => new TextDecoder().decode(b);

/** Persist a Ready into MemoryStorage the way an application must. */
export function persistReady(storage: MemoryStorage, rd: Ready): void {
  if (rd.snapshot !== undefined) storage.applySnapshot(rd.snapshot);
  if (rd.entries.length > 0) storage.append(rd.entries);
  if (rd.hardState !== undefined) storage.setHardState(rd.hardState);
}

export interface TestNode {
  id: NodeId;
  storage: MemoryStorage;
  raw: RawNode;
  /** Normal entries applied, by index (data as string; no-ops skipped). */
  applied: Map<number, string>;
  appliedIndex: number;
  confState: ConfState | undefined;
  readStates: { index: number; ctx: string }[];
}

export type MessageFilter = (m: Message) => boolean;

/**
 * A cluster of RawNodes wired through an in-memory, synchronous network: stabilize() runs Ready
 * cycles and delivers messages until everything is quiet. `drop` decides which messages are lost.
 */
export class Cluster {
  readonly nodes = new Map<NodeId, TestNode>();
  drop: MessageFilter = () => false;
  /** Every message delivered (for assertions on traffic). */
  delivered: Message[] = [];

  constructor(
    ids: NodeId[],
    private readonly opts: Partial<Omit<RaftConfig, "id" | "storage">> & { seed?: number; learners?: NodeId[] } = {},
  ) {
    const rnd = prng(opts.seed ?? 1);
    const voters = ids.filter((id) => !(opts.learners ?? []).includes(id));
    for (const id of ids) {
      const storage = new MemoryStorage();
      const raw = new RawNode({ electionTick: 10, heartbeatTick: 1, random: rnd, ...opts, id, storage });
      raw.bootstrap(voters);
      const n: TestNode = { id, storage, raw, applied: new Map(), appliedIndex: 0, confState: undefined, readStates: [] };
      this.nodes.set(id, n);
    }
    for (const l of opts.learners ?? []) {
      for (const n of this.nodes.values()) {
        n.raw.applyConfChange({ transition: 0, changes: [{ type: 3, nodeId: l }], context: new Uint8Array(0) });
      }
    }
    // Persist the bootstrap Readys without delivering anything.
    for (const n of this.nodes.values()) while (this.processReady(n, []));
  }

  /**
   * Crash and restart a node: everything not persisted into its MemoryStorage is lost and the
   * state machine restarts from the storage's snapshot.
   */
  restart(id: NodeId): void {
    const n = this.node(id);
    const snap = n.storage.snapshot();
    if (snap.metadata.index > 0) {
      n.applied = new Map(JSON.parse(dec(snap.data)) as [number, string][]);
      n.confState = snap.metadata.confState;
    }
    n.raw = new RawNode({ electionTick: 10, heartbeatTick: 1, random: prng(Number(id)), ...this.opts, id, storage: n.storage, applied: snap.metadata.index });
    n.appliedIndex = snap.metadata.index;
    for (const i of [...n.applied.keys()]) if (i > snap.metadata.index) n.applied.delete(i);
    // Re-apply the committed log (a restarted node sends nothing on its own).
    const out: Message[] = [];
    while (this.processReady(n, out));
    if (out.length > 0) throw new Error("a restarted node should not send before it is stepped");
  }

  node(id: NodeId): TestNode {
    const n = this.nodes.get(id);
    if (n === undefined) throw new Error(`no node ${id}`);
    return n;
  }

  /** Add an empty node (joining, not bootstrapped). */
  addEmptyNode(id: NodeId, opts: Partial<Omit<RaftConfig, "id" | "storage">> = {}): TestNode {
    const storage = new MemoryStorage();
    const raw = new RawNode({ electionTick: 10, heartbeatTick: 1, random: prng(Number(id)), ...opts, id, storage });
    const n: TestNode = { id, storage, raw, applied: new Map(), appliedIndex: 0, confState: undefined, readStates: [] };
    this.nodes.set(id, n);
    return n;
  }

  private processReady(n: TestNode, out: Message[]): boolean {
    if (!n.raw.hasReady()) return false;
    const rd = n.raw.ready();
    persistReady(n.storage, rd);
    out.push(...rd.messages);
    if (rd.snapshot !== undefined) {
      n.appliedIndex = rd.snapshot.metadata.index;
      n.confState = rd.snapshot.metadata.confState;
      n.applied = new Map(JSON.parse(dec(rd.snapshot.data)) as [number, string][]);
    }
    for (const e of rd.committedEntries) this.apply(n, e);
    for (const rs of rd.readStates) n.readStates.push({ index: rs.index, ctx: dec(rs.requestCtx) });
    n.raw.advance(rd);
    return true;
  }

  private apply(n: TestNode, e: Entry): void {
    if (e.type === EntryType.Normal) {
      if (e.data.byteLength > 0) n.applied.set(e.index, dec(e.data));
    } else {
      n.confState = n.raw.applyConfChange(confChangeFromEntry(e));
    }
    n.appliedIndex = e.index;
  }

  /** Run Ready cycles and deliver messages until quiet (bounded). */
  stabilize(maxRounds = 1000): void {
    for (let round = 0; round < maxRounds; round++) {
      const msgs: Message[] = [];
      let any = false;
      for (const n of this.nodes.values()) any = this.processReady(n, msgs) || any;
      if (!any && msgs.length === 0) return;
      for (const m of msgs) this.deliver(m);
    }
    throw new Error("cluster did not stabilize");
  }

  deliver(m: Message): void {
    if (this.drop(m)) return;
    const to = this.nodes.get(m.to);
    if (to === undefined) return;
    this.delivered.push(m);
    to.raw.step(m);
    if (m.type === MessageType.MsgSnap) this.nodes.get(m.from)?.raw.reportSnapshot(m.to, false);
  }

  /** Snapshot node `id`'s state machine at its applied index and compact its log up to it. */
  compact(id: NodeId): number {
    const n = this.node(id);
    const index = n.appliedIndex;
    n.storage.createSnapshot(index, n.confState, enc(JSON.stringify([...n.applied])));
    n.storage.compact(index);
    return index;
  }

  /** Take the messages of one node's next Ready (persisting and applying it) without delivering. */
  readyMessages(id: NodeId): Message[] {
    const out: Message[] = [];
    this.processReady(this.node(id), out);
    return out;
  }

  tick(id: NodeId, n = 1): void {
    for (let i = 0; i < n; i++) this.node(id).raw.tick();
  }

  tickAll(n = 1): void {
    for (let i = 0; i < n; i++) {
      for (const node of this.nodes.values()) node.raw.tick();
      this.stabilize();
    }
  }

  campaign(id: NodeId): void {
    this.node(id).raw.campaign();
    this.stabilize();
  }

  leader(): NodeId | undefined {
    const leaders = [...this.nodes.values()].filter((n) => n.raw.raft.state === StateType.Leader);
    return leaders.length === 1 ? leaders[0].id : undefined;
  }

  isolate(id: NodeId): void {
    this.drop = (m) => m.to === id || m.from === id;
  }

  heal(): void {
    this.drop = () => false;
  }

  /** Messages of a type delivered since `since`. */
  countDelivered(type: MessageType, since = 0): number {
    return this.delivered.slice(since).filter((m) => m.type === type).length;
  }
}
