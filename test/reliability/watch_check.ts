/**
 * Checks recorded watch streams against the KV history, for etcd's watch guarantees:
 *  - ordered: event revisions never decrease along a stream (across resumed segments too);
 *  - unique: no (revision, key) delivered twice;
 *  - atomic: all events of one revision arrive in one response;
 *  - reliable: no gaps — every write in the watched range that the stream covered (from its first
 *    start revision up to the last event or progress notification) was delivered, and every
 *    delivered event agrees with the history (same key and value at that revision);
 *  - resumable: a resumed segment delivers nothing below the revision it resumed from;
 *  - progress notifications never ahead of delivered events: after a notification at revision H
 *    no event at or below H may arrive;
 *  - prev_kv: the previous value is exactly the key's state before the event's revision (and for
 *    puts, version and create_revision follow from the key's history), wherever the revision log
 *    is complete enough to know it.
 */
import { writeRevision, type History } from "./history.js";
import { inRange, type WatchEvent, type WatchKv, type WatchStream } from "./watch_history.js";

/** One write as known from the KV history or from any watch event. `value: null` = delete. */
export interface LoggedWrite {
  key: string;
  revision: number;
  value: string | null;
}

export type WatchViolationKind =
  | "out-of-order"
  | "duplicate"
  | "not-atomic"
  | "gap"
  | "event-contradicts-history"
  | "event-never-written"
  | "resumed-below-start"
  | "progress-ahead"
  | "prev-kv-wrong"
  | "kv-metadata-wrong";

export interface WatchViolation {
  kind: WatchViolationKind;
  watchId: number;
  message: string;
}

export interface WatchCheckStats {
  streams: number;
  events: number;
  progressNotifies: number;
  /** Writes in watched ranges the streams were required to deliver. */
  requiredDeliveries: number;
  prevKvChecked: number;
  /** prev_kv checks skipped because an unknown-outcome write could sit between (revision log hole). */
  prevKvUnverifiable: number;
}

export interface WatchCheckResult {
  ok: boolean;
  violations: WatchViolation[];
  stats: WatchCheckStats;
}

export interface WatchCheckOptions {
  /** Stop collecting after this many violations (a broken stream repeats itself). */
  maxViolations?: number;
}

function eventValue(e: WatchEvent): string | null {
  return e.type === "put" ? e.kv.value : null;
}

function describeEvent(e: WatchEvent): string {
  return e.type === "put" ? `PUT ${e.kv.key}=${e.kv.value}@${e.kv.modRevision}` : `DELETE ${e.kv.key}@${e.kv.modRevision}`;
}

/**
 * The revision log: acknowledged writes from the history, plus the writes watch events reveal
 * (that is how unknown-outcome writes get their revisions). Conflicts are reported, first wins.
 */
function buildLog(history: History, streams: readonly WatchStream[], report: (v: WatchViolation) => void): Map<number, LoggedWrite> {
  const log = new Map<number, LoggedWrite>();
  for (const o of history) {
    const rev = writeRevision(o);
    if (rev === undefined) continue;
    const value = o.op.kind === "delete" ? null : (o.op as { value: string }).value;
    log.set(rev, { key: o.op.key, revision: rev, value });
  }
  // Values an unknown-outcome operation may have written (they may appear in events).
  const maybe = new Set<string>();
  for (const o of history) {
    if (o.result !== undefined) continue;
    maybe.add(`${o.op.key}\u0000${o.op.kind === "delete" ? "\u0001delete" : (o.op as { value?: string }).value ?? ""}`);
  }
  for (const s of streams) {
    for (const seg of s.segments) {
      for (const r of seg.responses) {
        for (const e of r.events) {
          const rev = e.kv.modRevision;
          const value = eventValue(e);
          const known = log.get(rev);
          if (known !== undefined) {
            if (known.key !== e.kv.key || known.value !== value) {
              report({ kind: "event-contradicts-history", watchId: s.id, message: `watch ${s.id} delivered ${describeEvent(e)} but revision ${rev} is ${known.value === null ? `DELETE ${known.key}` : `PUT ${known.key}=${known.value}`}` });
            }
            continue;
          }
          if (!maybe.has(`${e.kv.key}\u0000${value === null ? "\u0001delete" : value}`)) {
            report({ kind: "event-never-written", watchId: s.id, message: `watch ${s.id} delivered ${describeEvent(e)}, a write no client made` });
            continue;
          }
          log.set(rev, { key: e.kv.key, revision: rev, value });
        }
      }
    }
  }
  return log;
}

/** Expected per-revision key state (for prev_kv, version, create_revision) over a revision log. */
class KeyTimeline {
  /** Sorted logged writes per key. */
  private readonly byKey = new Map<string, LoggedWrite[]>();
  private readonly holes: number[];

  constructor(log: Map<number, LoggedWrite>) {
    const revs = [...log.keys()].sort((a, b) => a - b);
    for (const rev of revs) {
      const w = log.get(rev)!;
      let list = this.byKey.get(w.key);
      if (list === undefined) this.byKey.set(w.key, (list = []));
      list.push(w);
    }
    // etcd's first write is revision 2; any revision missing from the log is a hole.
    this.holes = [];
    const max = revs[revs.length - 1] ?? 1;
    const have = new Set(revs);
    for (let r = 2; r <= max; r++) if (!have.has(r)) this.holes.push(r);
  }

  /** Whether the log knows every write in (lo, hi). */
  completeBetween(lo: number, hi: number): boolean {
    return !this.holes.some((h) => h > lo && h < hi);
  }

  /** The last logged write to `key` below `rev`. */
  before(key: string, rev: number): LoggedWrite | undefined {
    const list = this.byKey.get(key) ?? [];
    let found: LoggedWrite | undefined;
    for (const w of list) {
      if (w.revision >= rev) break;
      found = w;
    }
    return found;
  }

  /** create_revision and version of `key` right after the write at `rev` (a put), from revision 1. */
  metadataAt(key: string, rev: number): { createRevision: number; version: number } {
    let createRevision = 0;
    let version = 0;
    for (const w of this.byKey.get(key) ?? []) {
      if (w.revision > rev) break;
      if (w.value === null) {
        createRevision = 0;
        version = 0;
      } else {
        if (version === 0) createRevision = w.revision;
        version++;
      }
    }
    return { createRevision, version };
  }
}

function sameKv(a: WatchKv, value: string, modRevision: number): boolean {
  return a.value === value && a.modRevision === modRevision;
}

export function checkWatches(history: History, streams: readonly WatchStream[], opts: WatchCheckOptions = {}): WatchCheckResult {
  const maxViolations = opts.maxViolations ?? 50;
  const violations: WatchViolation[] = [];
  const report = (v: WatchViolation) => {
    if (violations.length < maxViolations) violations.push(v);
  };
  const stats: WatchCheckStats = { streams: streams.length, events: 0, progressNotifies: 0, requiredDeliveries: 0, prevKvChecked: 0, prevKvUnverifiable: 0 };
  const log = buildLog(history, streams, report);
  const timeline = new KeyTimeline(log);

  for (const s of streams) {
    const delivered = new Set<string>();
    const responseOfRevision = new Map<number, number>();
    let lastRev = 0;
    let progressRev = 0;
    let coveredUpTo = 0;
    let firstStart: number | undefined;
    let responseNo = 0;
    for (const seg of s.segments) {
      const start = seg.startRevision > 0 ? seg.startRevision : (seg.createdRevision ?? Infinity) + 1;
      firstStart ??= start;
      for (const r of seg.responses) {
        responseNo++;
        if (r.progressNotify) {
          stats.progressNotifies++;
          progressRev = Math.max(progressRev, r.headerRevision);
          coveredUpTo = Math.max(coveredUpTo, r.headerRevision);
          continue;
        }
        for (const e of r.events) {
          stats.events++;
          const rev = e.kv.modRevision;
          const id = `${rev}\u0000${e.kv.key}`;
          if (delivered.has(id)) report({ kind: "duplicate", watchId: s.id, message: `watch ${s.id} delivered ${describeEvent(e)} twice` });
          delivered.add(id);
          if (rev < lastRev) report({ kind: "out-of-order", watchId: s.id, message: `watch ${s.id} delivered ${describeEvent(e)} after an event at revision ${lastRev}` });
          if (rev < start) report({ kind: "resumed-below-start", watchId: s.id, message: `watch ${s.id} segment from revision ${start} delivered ${describeEvent(e)}` });
          if (rev <= progressRev) report({ kind: "progress-ahead", watchId: s.id, message: `watch ${s.id} got a progress notification at revision ${progressRev} before ${describeEvent(e)}` });
          const firstResponse = responseOfRevision.get(rev);
          if (firstResponse !== undefined && firstResponse !== responseNo) report({ kind: "not-atomic", watchId: s.id, message: `watch ${s.id}: events of revision ${rev} split across responses` });
          responseOfRevision.set(rev, responseNo);
          if (!inRange(s.range, e.kv.key)) report({ kind: "event-contradicts-history", watchId: s.id, message: `watch ${s.id} delivered ${describeEvent(e)} outside its range` });
          lastRev = Math.max(lastRev, rev);
          coveredUpTo = Math.max(coveredUpTo, rev);
          checkEventKv(s, e, timeline, stats, report);
        }
      }
    }
    if (firstStart === undefined) continue;
    // Reliability: every logged write in range within the covered span was delivered.
    for (const w of log.values()) {
      if (w.revision < firstStart || w.revision > coveredUpTo || !inRange(s.range, w.key)) continue;
      stats.requiredDeliveries++;
      if (!delivered.has(`${w.revision}\u0000${w.key}`)) {
        report({ kind: "gap", watchId: s.id, message: `watch ${s.id} covered revisions ${firstStart}..${coveredUpTo} but missed ${w.value === null ? "DELETE" : "PUT"} ${w.key}${w.value === null ? "" : `=${w.value}`}@${w.revision}` });
      }
    }
  }
  return { ok: violations.length === 0, violations, stats };
}

function checkEventKv(s: WatchStream, e: WatchEvent, timeline: KeyTimeline, stats: WatchCheckStats, report: (v: WatchViolation) => void): void {
  const rev = e.kv.modRevision;
  const key = e.kv.key;
  if (timeline.completeBetween(1, rev + 1) && e.type === "put") {
    const want = timeline.metadataAt(key, rev);
    if (e.kv.createRevision !== want.createRevision || e.kv.version !== want.version) {
      report({ kind: "kv-metadata-wrong", watchId: s.id, message: `watch ${s.id}: ${describeEvent(e)} has create_revision ${e.kv.createRevision} version ${e.kv.version}, expected ${want.createRevision} and ${want.version}` });
    }
  }
  if (!s.prevKv) return;
  const prev = timeline.before(key, rev);
  if (!timeline.completeBetween(prev?.revision ?? 1, rev)) {
    stats.prevKvUnverifiable++;
    return;
  }
  stats.prevKvChecked++;
  const got = e.prevKv ?? null;
  const expectAbsent = prev === undefined || prev.value === null;
  const ok = expectAbsent ? got === null : got !== null && sameKv(got, prev.value!, prev.revision);
  if (!ok) {
    const want = expectAbsent ? "none" : `${prev.value}@${prev.revision}`;
    const saw = got === null ? "none" : `${got.value}@${got.modRevision}`;
    report({ kind: "prev-kv-wrong", watchId: s.id, message: `watch ${s.id}: ${describeEvent(e)} has prev_kv ${saw}, expected ${want}` });
  }
}
