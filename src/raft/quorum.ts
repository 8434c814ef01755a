import { compareNodeIds, type NodeId } from "./types.js";

export enum VoteResult {
  Pending = 1,
  Lost = 2,
  Won = 3,
}

/**
 * A simple majority configuration: a set of voters. The empty configuration wins every vote and
 * commits everything (so that it is neutral inside a joint configuration).
 */
export class MajorityConfig {
  readonly ids: Set<NodeId>;

  constructor(ids: Iterable<NodeId> = []) {
    this.ids = new Set(ids);
  }

  get size(): number {
    return this.ids.size;
  }

  sorted(): NodeId[] {
    return [...this.ids].sort(compareNodeIds);
  }

  /** The largest index acknowledged by a majority (acked returns 0 for unknown voters). */
  committedIndex(acked: (id: NodeId) => number | undefined): number {
    const n = this.ids.size;
    if (n === 0) return Number.MAX_SAFE_INTEGER;
    const srt: number[] = [];
    for (const id of this.ids) srt.push(acked(id) ?? 0);
    srt.sort((a, b) => a - b);
    return srt[n - (Math.floor(n / 2) + 1)];
  }

  voteResult(votes: Map<NodeId, boolean>): VoteResult {
    if (this.ids.size === 0) return VoteResult.Won;
    let yes = 0;
    let missing = 0;
    for (const id of this.ids) {
      const v = votes.get(id);
      if (v === undefined) missing++;
      else if (v) yes++;
    }
    const q = Math.floor(this.ids.size / 2) + 1;
    if (yes >= q) return VoteResult.Won;
    if (yes + missing >= q) return VoteResult.Pending;
    return VoteResult.Lost;
  }
}

/** Joint consensus: decisions need a majority in both the incoming and the outgoing configuration. */
export class JointConfig {
  constructor(
    readonly incoming: MajorityConfig = new MajorityConfig(),
    readonly outgoing: MajorityConfig = new MajorityConfig(),
  ) {}

  ids(): Set<NodeId> {
    const s = new Set(this.incoming.ids);
    for (const id of this.outgoing.ids) s.add(id);
    return s;
  }

  isJoint(): boolean {
    return this.outgoing.size > 0;
  }

  committedIndex(acked: (id: NodeId) => number | undefined): number {
    return Math.min(this.incoming.committedIndex(acked), this.outgoing.committedIndex(acked));
  }

  voteResult(votes: Map<NodeId, boolean>): VoteResult {
    const r1 = this.incoming.voteResult(votes);
    const r2 = this.outgoing.voteResult(votes);
    if (r1 === r2) return r1;
    if (r1 === VoteResult.Lost || r2 === VoteResult.Lost) return VoteResult.Lost;
    return VoteResult.Pending;
  }
}
