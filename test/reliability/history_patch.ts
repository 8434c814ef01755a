/**
 * Resolving unknown-outcome writes with the watch streams, as etcd's own robustness tests do.
 * Values are unique, so a watch event carrying an unknown put's (or CAS's) value proves that it
 * was applied, at that event's revision, and no later than the moment a watcher received it; a
 * write whose value never appears in a replay that is complete up to the end of the run had no
 * effect anyone could observe (or took effect after every recorded operation), so it is dropped.
 * This shrinks the checker's search (unknown operations are what make it branch) and tightens the
 * check: the resolved write must fit at exactly its revision.
 *
 * Unknown deletes carry no value to recognise them by; they stay unknown.
 */
import type { History, Operation } from "./history.js";
import type { WatchStream } from "./watch_history.js";

export interface PatchStats {
  /** Unknown writes found in a watch stream: given their revision and a return time. */
  applied: number;
  /** Unknown writes absent from the complete replay: dropped. */
  notApplied: number;
  /** Unknown operations left as they were (deletes, or events seen before the invocation). */
  stillUnknown: number;
}

interface Sighting {
  revision: number;
  /** Earliest receipt by any watcher (same monotonic clock as the history). */
  time: number;
}

/**
 * `replay` must be complete: it delivered every revision of the watched keys up to the end of the
 * run (the chaos runner waits for that). `streams` may include it and any other watchers; their
 * receipt times bound when a write took effect.
 */
export function patchUnknownWrites(history: History, streams: readonly WatchStream[], replay: WatchStream): { history: History; stats: PatchStats } {
  const seen = new Map<string, Sighting>();
  const note = (s: WatchStream, complete: boolean) => {
    for (const seg of s.segments) {
      for (const r of seg.responses) {
        for (const e of r.events) {
          if (e.type !== "put") continue;
          const k = `${e.kv.key}\u0000${e.kv.value}`;
          const prev = seen.get(k);
          // The replay's receipt time is late (it ran at the end): it only proves the revision.
          const time = complete ? Infinity : r.time;
          if (prev === undefined) seen.set(k, { revision: e.kv.modRevision, time });
          else prev.time = Math.min(prev.time, time);
        }
      }
    }
  };
  for (const s of streams) if (s !== replay) note(s, false);
  note(replay, true);

  const stats: PatchStats = { applied: 0, notApplied: 0, stillUnknown: 0 };
  const out: Operation[] = [];
  for (const o of history) {
    if (o.result !== undefined || o.op.kind === "get") {
      out.push(o);
      continue;
    }
    if (o.op.kind === "delete") {
      stats.stillUnknown++;
      out.push(o);
      continue;
    }
    const s = seen.get(`${o.op.key}\u0000${o.op.value}`);
    if (s === undefined) {
      stats.notApplied++;
      continue;
    }
    if (s.time < o.call) {
      // Seen before it was sent: leave it to the checker, which will find the contradiction.
      stats.stillUnknown++;
      out.push(o);
      continue;
    }
    stats.applied++;
    const result = o.op.kind === "put" ? { kind: "put" as const, revision: s.revision } : { kind: "cas" as const, revision: s.revision, succeeded: true };
    out.push({ ...o, ret: s.time, result });
  }
  return { history: out, stats };
}
