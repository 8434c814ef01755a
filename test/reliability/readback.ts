/**
 * The lost-write check: every acknowledged write is read back from every member, at its own
 * revision, and must be there with its value (a delete: the key absent at its revision and present
 * just before). Reads run in sweeps during the run and once more after healing; a member that is
 * down, paused, cut off or behind keeps its writes pending until a later sweep.
 *
 * Compaction would make old revisions unreadable, so the chaos run compacts only below
 * `compactionBound()`: below every write still pending on some member, and below every write that
 * may still be acknowledged (an operation in flight was invoked after some revision `floor` was
 * observed, so linearizability puts any write it makes above `floor`). A write found compacted
 * anyway is "unverified", which fails the run as a lost write does: the instrument must not go
 * quiet.
 *
 * Before this, the check compared writes with the watch streams only (kept below as
 * `writesMissingFromWatch`), and the final replay covered only revisions above the last
 * compaction: in a 30-minute run about 95% of writes were checked against live watch events only.
 */
import { writeRevision, type History, type Operation } from "./history.js";
import type { WatchStream } from "./watch_history.js";

/** A write the server acknowledged: `value` null for a delete. */
export interface AckedWrite {
  opId: number;
  key: string;
  revision: number;
  value: string | null;
}

/** One read of `key` at `revision` on one member, as the member answers it. */
export type ReadAt = { kind: "kv"; value: string; modRevision: number } | { kind: "absent" };

/** Reads a member's local state (serializable: no ReadIndex, no forwarding). */
export interface MemberReader {
  readonly name: string;
  /** The member's applied revision (reads above it would be "future"). */
  localRevision(): Promise<number>;
  /** Reads every (key, revision) in one request; rejects with a compacted error as etcd does. */
  readAt(reads: ReadonlyArray<{ key: string; revision: number }>): Promise<ReadAt[]>;
}

export function ackedWrite(o: Operation): AckedWrite | undefined {
  const revision = writeRevision(o);
  if (revision === undefined) return undefined;
  return { opId: o.id, key: o.op.key, revision, value: o.op.kind === "delete" ? null : (o.op as { value: string }).value };
}

export interface ReadBackOptions {
  /** Reads per request (etcd's default --max-txn-ops is 128; a delete takes two). */
  batch?: number;
}

const COMPACTED = /required revision has been compacted/;

export class ReadBack {
  /** Per member: writes not yet verified there, by op id. */
  private readonly pending: Map<string, Map<number, AckedWrite>>;
  private readonly batch: number;
  private source: readonly Operation[] = [];
  private consumed = 0;
  private writeCount = 0;
  readonly lost: string[] = [];
  readonly unverified: string[] = [];
  /** Reads answered and compared (a write counts once per member). */
  verified = 0;
  private sweeping: Promise<void> | undefined;

  constructor(
    private readonly members: readonly MemberReader[],
    opts: ReadBackOptions = {},
  ) {
    this.pending = new Map(members.map((m) => [m.name, new Map()]));
    this.batch = opts.batch ?? 100;
  }

  /** The append-only list of completed operations (HistoryRecorder.completed()) to check. */
  follow(ops: readonly Operation[]): void {
    this.source = ops;
    this.consumed = 0;
  }

  /** Takes the writes acknowledged since the last call. */
  sync(): void {
    for (; this.consumed < this.source.length; this.consumed++) {
      const w = ackedWrite(this.source[this.consumed] as Operation);
      if (w === undefined) continue;
      this.writeCount++;
      for (const p of this.pending.values()) p.set(w.opId, w);
    }
  }

  /** Acknowledged writes taken so far. */
  get writes(): number {
    return this.writeCount;
  }

  /** The members each pending write still waits for (for the final report). */
  pendingByMember(): Record<string, number> {
    return Object.fromEntries([...this.pending].map(([name, p]) => [name, p.size]));
  }

  pendingCount(): number {
    let n = 0;
    for (const p of this.pending.values()) n += p.size;
    return n;
  }

  /** The lowest revision some member has not been checked at yet (Infinity when none). */
  lowestPending(): number {
    let low = Infinity;
    for (const p of this.pending.values()) for (const w of p.values()) low = Math.min(low, w.revision);
    return low;
  }

  /**
   * Compacting at a revision up to this one destroys nothing the check still has to read:
   * `inflightFloor` is the lowest revision observed before an operation still in flight was invoked
   * (its write, if any, lands above it). A delete is read at its revision - 1 too, hence the 1.
   */
  compactionBound(inflightFloor: number): number {
    return Math.min(this.lowestPending() - 1, inflightFloor);
  }

  /** Syncs, then one pass over every member (concurrently); a sweep already running is joined. */
  sweep(): Promise<void> {
    this.sync();
    this.sweeping ??= Promise.all(this.members.map((m) => this.sweepMember(m))).then(
      () => {
        this.sweeping = undefined;
      },
      (e: unknown) => {
        this.sweeping = undefined;
        throw e;
      },
    );
    return this.sweeping;
  }

  private async sweepMember(m: MemberReader): Promise<void> {
    const pending = this.pending.get(m.name) as Map<number, AckedWrite>;
    if (pending.size === 0) return;
    let applied: number;
    try {
      applied = await m.localRevision();
    } catch {
      return; // down, paused or cut off: a later sweep
    }
    const ready = [...pending.values()].filter((w) => w.revision <= applied).sort((a, b) => a.revision - b.revision);
    const per = Math.max(1, Math.floor(this.batch / 2));
    for (let i = 0; i < ready.length; i += per) {
      const chunk = ready.slice(i, i + per);
      const reads = chunk.flatMap((w) => (w.value === null ? [{ key: w.key, revision: w.revision }, { key: w.key, revision: w.revision - 1 }] : [{ key: w.key, revision: w.revision }]));
      let got: ReadAt[];
      try {
        got = await m.readAt(reads);
      } catch (e) {
        if (!COMPACTED.test(String((e as { details?: string }).details ?? e))) return; // unreachable now: a later sweep
        await this.classifyCompacted(m, chunk, pending);
        continue;
      }
      let k = 0;
      for (const w of chunk) {
        const at = got[k++] as ReadAt;
        const before = w.value === null ? (got[k++] as ReadAt) : undefined;
        this.compare(m.name, w, at, before);
        pending.delete(w.opId);
      }
    }
  }

  /** A batch failed as compacted: read its writes one by one to name the ones that are gone. */
  private async classifyCompacted(m: MemberReader, chunk: readonly AckedWrite[], pending: Map<number, AckedWrite>): Promise<void> {
    for (const w of chunk) {
      const reads = w.value === null ? [{ key: w.key, revision: w.revision }, { key: w.key, revision: w.revision - 1 }] : [{ key: w.key, revision: w.revision }];
      try {
        const got = await m.readAt(reads);
        this.compare(m.name, w, got[0] as ReadAt, got[1]);
      } catch (e) {
        if (!COMPACTED.test(String((e as { details?: string }).details ?? e))) return;
        this.unverified.push(`${m.name}: ${describe(w)} was compacted before it was read back`);
      }
      pending.delete(w.opId);
    }
  }

  private compare(member: string, w: AckedWrite, at: ReadAt, before: ReadAt | undefined): void {
    this.verified++;
    if (w.value !== null) {
      if (at.kind === "kv" && at.modRevision === w.revision && at.value === w.value) return;
      this.lost.push(`${member}: ${describe(w)}, the member has ${show(at)} at revision ${w.revision}`);
      return;
    }
    if (at.kind === "absent" && before?.kind === "kv") return;
    this.lost.push(`${member}: ${describe(w)}, the member has ${show(at)} at revision ${w.revision} and ${before === undefined ? "?" : show(before)} at ${w.revision - 1}`);
  }
}

function describe(w: AckedWrite): string {
  return w.value === null ? `delete ${w.key} acknowledged at revision ${w.revision}` : `put ${w.key}=${w.value} acknowledged at revision ${w.revision}`;
}

function show(r: ReadAt): string {
  return r.kind === "absent" ? "no key" : `${r.value}@${r.modRevision}`;
}

/**
 * Acknowledged writes missing from the revision history as the watch streams delivered it (the
 * final replay plus the live watchers, which watched from revision 1 and are checked gap-free by
 * the watch checks). A second, independent view beside the read-back.
 */
export function writesMissingFromWatch(history: History, streams: readonly WatchStream[]): string[] {
  const byRev = new Map<number, { key: string; value: string | null }>();
  for (const s of streams) for (const seg of s.segments) for (const r of seg.responses) for (const e of r.events) byRev.set(e.kv.modRevision, { key: e.kv.key, value: e.type === "put" ? e.kv.value : null });
  const lost: string[] = [];
  for (const o of history) {
    const w = ackedWrite(o);
    if (w === undefined) continue;
    const got = byRev.get(w.revision);
    if (got === undefined || got.key !== w.key || got.value !== w.value) {
      lost.push(`${describe(w)}, the watch streams have ${got === undefined ? "nothing" : `${got.key}=${got.value ?? "(delete)"}`}`);
    }
  }
  return lost;
}
