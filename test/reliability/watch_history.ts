/**
 * Recorded watch streams, for the watch checks. A stream is one logical watcher: it may be
 * re-created after its connection fails ("segments"), each time resuming from the revision after
 * the last event it received — the way etcd's clients resume watches.
 */

/** A key-value as a watch event carries it (etcd's mvccpb.KeyValue, strings instead of bytes). */
export interface WatchKv {
  key: string;
  value: string;
  createRevision: number;
  modRevision: number;
  version: number;
}

export interface WatchEvent {
  type: "put" | "delete";
  /** For a delete: the key, the delete's revision as modRevision, empty value, version 0. */
  kv: WatchKv;
  /** Present when the watcher asked for prev_kv; null when there was no previous value. */
  prevKv?: WatchKv | null;
}

export interface WatchResponseRecord {
  /** Monotonic milliseconds at receipt. */
  time: number;
  headerRevision: number;
  events: WatchEvent[];
  /** An empty, non-created, non-canceled response: etcd's progress notification. */
  progressNotify: boolean;
}

export interface WatchSegment {
  /** The start_revision the watch was created with (0 = "from now"). */
  startRevision: number;
  /** Header revision of the created response (what "now" was for start_revision 0). */
  createdRevision?: number;
  responses: WatchResponseRecord[];
}

/** The watched range, etcd style: rangeEnd "" = just `key`, "\0" = every key ≥ `key`. */
export interface WatchRange {
  key: string;
  rangeEnd: string;
}

export interface WatchStream {
  id: number;
  range: WatchRange;
  prevKv: boolean;
  segments: WatchSegment[];
}

export function inRange(range: WatchRange, key: string): boolean {
  const k = Buffer.from(key);
  const c = Buffer.compare(k, Buffer.from(range.key));
  if (range.rangeEnd === "") return c === 0;
  if (range.rangeEnd === "\u0000") return c >= 0;
  return c >= 0 && Buffer.compare(k, Buffer.from(range.rangeEnd)) < 0;
}

/** etcd's prefix range end: the key with its last byte incremented (trailing 0xff dropped). */
export function prefixRangeEnd(prefix: string): string {
  const b = Buffer.from(prefix);
  for (let i = b.length - 1; i >= 0; i--) {
    if (b[i]! < 0xff) {
      const end = Buffer.from(b.subarray(0, i + 1));
      end[i]!++;
      return end.toString("latin1");
    }
  }
  return "\u0000";
}

/** Builds a stream record as responses arrive. */
export class WatchStreamRecorder {
  readonly stream: WatchStream;
  private lastRevision = 0;

  constructor(id: number, range: WatchRange, prevKv: boolean, private readonly maxResponses = 1_000_000) {
    this.stream = { id, range, prevKv, segments: [] };
  }

  /** Opens a segment; returns the start revision to ask for (resuming after the last event). */
  open(firstStartRevision: number): number {
    const start = this.stream.segments.length === 0 ? firstStartRevision : this.lastRevision + 1;
    this.stream.segments.push({ startRevision: start, responses: [] });
    return start;
  }

  created(headerRevision: number): void {
    const seg = this.current();
    seg.createdRevision = headerRevision;
    // A watch "from now" that never saw an event resumes from its creation point.
    if (seg.startRevision === 0 && this.lastRevision === 0) this.lastRevision = headerRevision;
  }

  response(r: WatchResponseRecord): void {
    const seg = this.current();
    if (seg.responses.length >= this.maxResponses) throw new Error(`watch ${this.stream.id}: too many responses`);
    seg.responses.push(r);
    for (const e of r.events) this.lastRevision = Math.max(this.lastRevision, e.kv.modRevision);
  }

  get resumeRevision(): number {
    return this.lastRevision + 1;
  }

  private current(): WatchSegment {
    const seg = this.stream.segments[this.stream.segments.length - 1];
    if (seg === undefined) throw new Error("no open segment");
    return seg;
  }
}
