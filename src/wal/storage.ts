/**
 * A raft Storage backed by the WAL: etcd's MemoryStorage semantics (append, setHardState,
 * applySnapshot, compact, createSnapshot, and the same errors), but only a bounded tail of recent
 * entries is kept in memory. Older entries stay on disk; the WAL's location index answers term(i)
 * without I/O, and entries(lo, hi) reads them back (verified) when a lagging follower needs them.
 *
 * Write path (the caller's Ready loop): `await wal.save(hardState, entries)`, then
 * `storage.setHardState(hs)` and `storage.append(entries)` — or `await storage.save(hs, entries)`,
 * which does exactly that. An entry is evicted from memory only once the WAL holds that very entry
 * (same index and term) on disk, so what raft reads never depends on a write still in flight.
 *
 * Release rule: after compacting to `c`, release the WAL only up to `firstIndex() - 1` (the WAL
 * additionally caps releases at its newest snapshot marker), so evicted entries remain readable.
 */
import {
  CompactedError,
  EMPTY_HARD_STATE,
  type ConfState,
  type Entry,
  type HardState,
  type Snapshot,
  SnapOutOfDateError,
  type Storage,
  UnavailableError,
  emptyConfState,
} from "../raft/types.js";
import { assert } from "./errors.js";
import type { WalLogger } from "./logger.js";
import { Snapshotter } from "./snapshotter.js";
import { WAL, type WalMetadata, type WalOptions } from "./wal.js";

export interface WalStorageOptions {
  /** Entries kept in memory (the newest). Default 10,000. */
  tailEntriesMax?: number;
  /** Bytes of entry data kept in memory. Default 64 MiB. */
  tailBytesMax?: number;
}

export interface WalStorageInit {
  snapshot?: Snapshot | undefined;
  hardState?: HardState;
  /** The entries replayed after the snapshot (as returned by WAL.open). */
  entries?: Entry[];
}

export interface WalStorageOpenOptions {
  walDir: string;
  snapDir: string;
  /** Written into a new WAL; an existing WAL's own metadata is returned instead. */
  metadata: WalMetadata;
  wal?: WalOptions;
  storage?: WalStorageOptions;
  logger?: WalLogger;
}

export interface WalStorageOpenResult {
  storage: WalStorage;
  wal: WAL;
  snapshotter: Snapshotter;
  metadata: WalMetadata;
  /** The snapshot the log was replayed from (undefined when none). */
  snapshot: Snapshot | undefined;
  /** True when no WAL existed and a new one was created (a new member). */
  created: boolean;
}

function emptySnapshot(): Snapshot {
  return { data: new Uint8Array(0), metadata: { index: 0, term: 0, confState: emptyConfState() } };
}

export class WalStorage implements Storage {
  private hs: HardState = { ...EMPTY_HARD_STATE };
  private snap: Snapshot = emptySnapshot();
  /** Index of the last compacted entry (etcd's dummy entry ents[0]) and its term. */
  private offset = 0;
  private offsetTerm = 0;
  private last = 0;
  /** In-memory entries [tailStart, last]; [offset + 1, tailStart) are read back from the WAL. */
  private tail: Entry[] = [];
  private tailStart = 1;
  private tailBytes = 0;
  private readonly tailEntriesMax: number;
  private readonly tailBytesMax: number;

  constructor(
    readonly wal: WAL,
    init: WalStorageInit = {},
    opts: WalStorageOptions = {},
  ) {
    this.tailEntriesMax = opts.tailEntriesMax ?? 10_000;
    this.tailBytesMax = opts.tailBytesMax ?? 64 * 1024 * 1024;
    assert(this.tailEntriesMax >= 1 && this.tailBytesMax >= 0, "tail limits must be positive");
    if (init.snapshot && init.snapshot.metadata.index > 0) this.applySnapshot(init.snapshot);
    if (init.hardState) this.setHardState(init.hardState);
    if (init.entries && init.entries.length > 0) this.append(init.entries);
  }

  /**
   * etcd's bootstrap: create the WAL if there is none; otherwise load the newest intact snapshot
   * that has a committed marker in the WAL, replay the WAL from it, and rebuild the storage.
   */
  static async open(o: WalStorageOpenOptions): Promise<WalStorageOpenResult> {
    const walOptions: WalOptions = { logger: o.logger, ...o.wal };
    // prom-client is loaded only when metrics are wanted (as the WAL does).
    const registry = o.wal?.registry;
    const timings = registry === undefined ? undefined : (await import("./metrics.js")).createSnapshotTimings(registry);
    const snapshotter = new Snapshotter(o.snapDir, { logger: o.logger, timings });
    if (!WAL.exists(o.walDir)) {
      const wal = await WAL.create(o.walDir, o.metadata, walOptions);
      return { storage: new WalStorage(wal, {}, o.storage), wal, snapshotter, metadata: o.metadata, snapshot: undefined, created: true };
    }
    const markers = await WAL.validSnapshotMarkers(o.walDir);
    const snapshot = snapshotter.loadNewestAvailable(markers);
    const from = snapshot ? { index: snapshot.metadata.index, term: snapshot.metadata.term } : { index: 0, term: 0 };
    const r = await WAL.open(o.walDir, from, walOptions);
    const storage = new WalStorage(r.wal, { snapshot, hardState: r.hardState, entries: r.entries }, o.storage);
    return { storage, wal: r.wal, snapshotter, metadata: r.metadata, snapshot, created: false };
  }

  initialState(): { hardState: HardState; confState: ConfState } {
    return { hardState: { ...this.hs }, confState: this.snap.metadata.confState };
  }

  entries(lo: number, hi: number, maxSizeBytes: number): Entry[] {
    if (lo <= this.offset) throw new CompactedError();
    if (hi > this.last + 1) throw new Error(`entries' hi(${hi}) is out of bound lastindex(${this.last})`);
    if (this.last === this.offset) throw new UnavailableError();
    if (lo >= hi) return [];
    const out: Entry[] = [];
    let bytes = 0;
    if (lo < this.tailStart) {
      const fromDisk = this.wal.readEntries(lo, Math.min(hi, this.tailStart), maxSizeBytes);
      for (const e of fromDisk) bytes += e.data.byteLength;
      out.push(...fromDisk);
      if (out.length < Math.min(hi, this.tailStart) - lo) return out; // the size limit was reached
    }
    for (let i = Math.max(lo, this.tailStart); i < hi; i++) {
      const e = this.tail[i - this.tailStart]!;
      bytes += e.data.byteLength;
      if (out.length > 0 && bytes > maxSizeBytes) break;
      out.push(e);
    }
    return out;
  }

  term(i: number): number {
    if (i < this.offset) throw new CompactedError();
    if (i > this.last) throw new UnavailableError();
    if (i === this.offset) return this.offsetTerm;
    if (i >= this.tailStart) return this.tail[i - this.tailStart]!.term;
    const t = this.wal.entryTerm(i);
    assert(t !== undefined, () => `entry ${i} is neither in memory nor in the WAL`);
    return t;
  }

  lastIndex(): number {
    return this.last;
  }

  firstIndex(): number {
    return this.offset + 1;
  }

  snapshot(): Snapshot {
    return this.snap;
  }

  setHardState(hs: HardState): void {
    this.hs = { ...hs };
  }

  /** etcd's MemoryStorage.Append: drops what is compacted, replaces a conflicting suffix. */
  append(entries: Entry[]): void {
    if (entries.length === 0) return;
    const first = this.firstIndex();
    const lastNew = entries[0]!.index + entries.length - 1;
    if (lastNew < first) return;
    let ents = entries;
    if (first > ents[0]!.index) ents = ents.slice(first - ents[0]!.index);
    const start = ents[0]!.index;
    if (start > this.last + 1) throw new Error(`missing log entry [last: ${this.last}, append at: ${start}]`);
    if (start < this.tailStart) {
      // The conflict reaches below the in-memory tail: the new entries become the whole tail.
      this.tail = [];
      this.tailBytes = 0;
      this.tailStart = start;
    } else {
      for (let k = start - this.tailStart; k < this.tail.length; k++) this.tailBytes -= this.tail[k]!.data.byteLength;
      this.tail.length = start - this.tailStart;
    }
    for (const e of ents) {
      this.tail.push(ownData(e));
      this.tailBytes += e.data.byteLength;
    }
    this.last = lastNew;
    this.evict();
  }

  /** Persist then append: the write path in one call. */
  async save(hardState: HardState | undefined, entries: Entry[]): Promise<void> {
    await this.wal.save(hardState, entries);
    if (hardState) this.setHardState(hardState);
    this.append(entries);
  }

  applySnapshot(snap: Snapshot): void {
    if (this.snap.metadata.index >= snap.metadata.index) throw new SnapOutOfDateError();
    this.snap = snap;
    this.offset = snap.metadata.index;
    this.offsetTerm = snap.metadata.term;
    this.last = snap.metadata.index;
    this.tail = [];
    this.tailBytes = 0;
    this.tailStart = snap.metadata.index + 1;
  }

  compact(index: number): void {
    if (index <= this.offset) throw new CompactedError();
    if (index > this.last) throw new Error(`compact ${index} is out of bound lastindex(${this.last})`);
    this.offsetTerm = this.term(index);
    this.offset = index;
    if (index >= this.tailStart) {
      const drop = index + 1 - this.tailStart;
      for (let k = 0; k < drop; k++) this.tailBytes -= this.tail[k]!.data.byteLength;
      this.tail = this.tail.slice(drop);
      this.tailStart = index + 1;
    }
  }

  createSnapshot(index: number, confState: ConfState, data: Uint8Array): Snapshot {
    if (index <= this.snap.metadata.index) throw new SnapOutOfDateError();
    if (index > this.last) throw new Error(`snapshot ${index} is out of bound lastindex(${this.last})`);
    this.snap = { data, metadata: { index, term: this.term(index), confState } };
    return this.snap;
  }

  /** Entries currently held in memory (for tests and metrics). */
  tailLength(): number {
    return this.tail.length;
  }

  /**
   * Drops the oldest in-memory entries once a limit is exceeded, down to 90% of it (so the
   * O(tail) copy happens once per tenth of the tail, not on every append), but only entries the
   * WAL already holds on disk.
   */
  private evict(): void {
    if (this.tail.length <= this.tailEntriesMax && this.tailBytes <= this.tailBytesMax) return;
    const entriesTarget = Math.floor(this.tailEntriesMax * 0.9);
    const bytesTarget = Math.floor(this.tailBytesMax * 0.9);
    let drop = 0;
    while (this.tail.length - drop > 1 && (this.tail.length - drop > entriesTarget || this.tailBytes > bytesTarget)) {
      const e = this.tail[drop]!;
      if (this.wal.entryTerm(e.index) !== e.term) break;
      this.tailBytes -= e.data.byteLength;
      drop++;
    }
    if (drop === 0) return;
    this.tail = this.tail.slice(drop);
    this.tailStart += drop;
  }
}

/**
 * An entry whose data is a view into a much larger buffer (a follower's entries are views into
 * the peer frame they arrived in) gets a copy of its own before it stays in the tail: otherwise
 * the tail's byte bound would count 300 bytes while each entry kept a frame alive.
 */
function ownData(e: Entry): Entry {
  const d = e.data;
  if (d.buffer.byteLength <= 2 * d.byteLength + 1024) return e;
  const own = new Uint8Array(d.byteLength);
  own.set(d);
  return { ...e, data: own };
}
