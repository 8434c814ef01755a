/**
 * The watchable store (etcd mvcc/watchable_store.go): delivers the events of
 * every applied revision to the watchers interested in them.
 *
 * - synced watchers are up to date: each revision's events are handed to them
 *   in the same turn as the apply, all events of a revision in one response;
 * - unsynced watchers start in the past, or were parked because their
 *   stream's buffer was full; a sync pass (every `syncIntervalMs`, or at once
 *   while there is progress) reads their missing revisions from the backend
 *   in bounded chunks and moves them to synced once caught up;
 * - a watcher whose next revision was compacted is canceled with
 *   compact_revision.
 * Apply never waits for a consumer, and memory per stream is bounded by its
 * buffer.
 */

import { invariant } from './errors.js';
import type { KvStore } from './kvstore.js';
import { rowToKv } from './kvstore_txn.js';
import { firstOfMain, lastOfMain, revMain } from './revision.js';
import { keyToString } from './tree_index.js';
import { type Event, EventType, type KeyValue } from './types.js';
import { Watcher, WatcherState, type WatchResponse } from './watcher.js';
import { WatcherGroup } from './watcher_group.js';
import { WatchStream, type WatchHost } from './watch_stream.js';

export interface WatchableStoreOptions {
  /** Pause between sync passes when no progress was made. etcd: 100 ms. */
  syncIntervalMs?: number;
  /** Watchers caught up per pass. etcd: 512. */
  maxWatchersPerSync?: number;
  /** Backend rows read per pass. */
  syncRowsMax?: number;
  /** Revisions per catch-up response. etcd watchBatchMaxRevs: 1,000. */
  batchMaxRevs?: number;
  /** Responses buffered per stream. etcd chanBufLen: 128. */
  streamBufferMax?: number;
  /** Progress notifications for idle watchers with progress_notify. etcd: 10 minutes. */
  progressNotifyIntervalMs?: number;
}

const EMPTY = Buffer.alloc(0);

export class WatchableStore implements WatchHost {
  private readonly synced = new WatcherGroup();
  private readonly unsynced = new Set<Watcher>();
  private readonly progressWatchers = new Set<Watcher>();
  private readonly streams = new Set<WatchStream>();
  /** Events sent by streams already closed (eventsSent() adds the open ones'). */
  private closedStreamsEvents = 0;
  private syncTimer: NodeJS.Timeout | null = null;
  private syncSoon = false;
  private progressTimer: NodeJS.Timeout | null = null;
  private closed = false;
  /** Watchers dropped by compaction that their clients have not canceled yet. */
  private compacted = 0;
  private readonly o: Required<WatchableStoreOptions>;

  constructor(
    readonly kv: KvStore,
    opts: WatchableStoreOptions = {},
  ) {
    this.o = {
      syncIntervalMs: opts.syncIntervalMs ?? 100,
      maxWatchersPerSync: opts.maxWatchersPerSync ?? 512,
      syncRowsMax: opts.syncRowsMax ?? 10_000,
      batchMaxRevs: opts.batchMaxRevs ?? 1000,
      streamBufferMax: opts.streamBufferMax ?? 128,
      progressNotifyIntervalMs: opts.progressNotifyIntervalMs ?? 600_000,
    };
    kv.setObserver((rev, events) => this.notify(rev, events));
    // etcd watchableStore.Restore: after a snapshot replaced the backend, every watcher catches up from it.
    kv.onRestored(() => this.moveAllToUnsynced());
    this.progressTimer = setInterval(() => this.progressTick(), this.o.progressNotifyIntervalMs);
    this.progressTimer.unref();
  }

  /** A new stream for one client watch stream. */
  watchStream(opts: { bufferMax?: number } = {}): WatchStream {
    invariant(!this.closed, 'watchable store is closed');
    const s = new WatchStream(this, opts.bufferMax ?? this.o.streamBufferMax);
    this.streams.add(s);
    return s;
  }

  /** Closes a stream and forgets it. */
  closeStream(s: WatchStream): void {
    s.close();
    if (this.streams.delete(s)) this.closedStreamsEvents += s.eventsSent;
  }

  /** Open watch streams (etcd_debugging_mvcc_watch_stream_total). */
  get streamCount(): number {
    return this.streams.size;
  }

  /** Events handed to watch streams so far (etcd_debugging_mvcc_events_total). */
  eventsSent(): number {
    let n = this.closedStreamsEvents;
    for (const s of this.streams) n += s.eventsSent;
    return n;
  }

  get syncedCount(): number {
    return this.synced.size;
  }

  get unsyncedCount(): number {
    return this.unsynced.size;
  }

  /** Watchers dropped by compaction, still in their streams until canceled (etcd's watcherGauge counts them). */
  get compactedCount(): number {
    return this.compacted;
  }

  /** Responses waiting in all streams' buffers (each bounded by its bufferMax). */
  queuedResponses(): number {
    let n = 0;
    for (const s of this.streams) n += s.queued;
    return n;
  }

  currentRevision(): number {
    return this.kv.currentRevision();
  }

  // ---- WatchHost

  addWatcher(w: Watcher): void {
    const cur = this.kv.currentRevision();
    // etcd watchableStore.watch: start 0 or in the future → synced from max(start, cur+1).
    if (w.minRev === 0 || w.minRev > cur) {
      w.minRev = Math.max(w.minRev, cur + 1);
      w.state = WatcherState.SYNCED;
      this.synced.add(w);
    } else {
      w.state = WatcherState.UNSYNCED;
      this.unsynced.add(w);
      this.scheduleSync(true);
    }
    if (w.progressNotify) this.progressWatchers.add(w);
  }

  removeWatcher(w: Watcher): void {
    if (w.state === WatcherState.SYNCED) this.synced.delete(w);
    else if (w.state === WatcherState.UNSYNCED) this.unsynced.delete(w);
    else if (w.state === WatcherState.COMPACTED) this.compacted--;
    w.state = WatcherState.CANCELED;
    this.progressWatchers.delete(w);
  }

  kick(): void {
    if (this.unsynced.size > 0) this.scheduleSync(true);
  }

  prevKvAt(key: Uint8Array, rev: number): KeyValue | undefined {
    if (this.kv.isClosed) return undefined;
    return this.kv.kvAt(key, rev);
  }

  // ---- notify (synced path, inside apply)

  private notify(rev: number, events: Event[]): void {
    if (this.synced.size === 0) return;
    const batches = new Map<Watcher, Event[]>();
    for (const ev of events) {
      this.synced.forEachMatching(keyToString(ev.kv.key), (w) => {
        if (ev.type === EventType.PUT ? w.filterPut : w.filterDelete) return;
        const list = batches.get(w);
        if (list === undefined) batches.set(w, [ev]);
        else list.push(ev);
      });
    }
    for (const [w, evs] of batches) {
      if (w.minRev > rev) continue; // a future start revision not reached yet
      if (w.sink.trySend({ watchId: w.id, events: evs, revision: rev })) {
        w.minRev = rev + 1;
        w.sentSinceTick = true;
        continue;
      }
      // The stream is full: park the watcher; the sync pass re-reads this revision from the backend.
      this.synced.delete(w);
      w.state = WatcherState.UNSYNCED;
      w.minRev = rev;
      this.unsynced.add(w);
      this.scheduleSync(false);
    }
    // Watchers that matched nothing (or only filtered events) are simply up to date; minRev is only a floor.
  }

  // ---- sync (unsynced path)

  private scheduleSync(soon: boolean): void {
    if (this.closed) return;
    if (soon && !this.syncSoon) {
      this.syncSoon = true;
      setImmediate(() => {
        this.syncSoon = false;
        this.syncPass();
      });
      return;
    }
    if (this.syncTimer === null) {
      this.syncTimer = setTimeout(() => {
        this.syncTimer = null;
        this.syncPass();
      }, this.o.syncIntervalMs);
      this.syncTimer.unref();
    }
  }

  /** One bounded catch-up pass (etcd syncWatchers). */
  syncPass(): void {
    if (this.closed || this.kv.isClosed) return;
    if (this.unsynced.size === 0) return;
    const cur = this.kv.currentRevision();
    // etcd's compactMainRev: -1 until the first compaction, which makes a start of -2 or below a
    // compacted watcher (canceled with compact_revision -1) as in etcd 3.4.
    const compactRev = this.kv.compactMainRev;
    const chosen: Watcher[] = [];
    let minRev = Number.POSITIVE_INFINITY;
    for (const w of this.unsynced) {
      if (chosen.length >= this.o.maxWatchersPerSync) break;
      if (!w.sink.hasRoom()) continue;
      if (w.minRev < compactRev) {
        // etcd: the watcher missed compacted history; cancel it with the compaction revision
        // (etcd's response carries header revision 0 here). It stays known to its stream, as in
        // etcd's watchStream: a later cancel request for it is answered.
        if (w.sink.trySend({ watchId: w.id, events: [], revision: 0, compactRevision: compactRev, canceled: true })) {
          this.unsynced.delete(w);
          w.state = WatcherState.COMPACTED;
          this.compacted++;
          this.progressWatchers.delete(w);
        }
        continue;
      }
      if (w.minRev > cur) {
        this.toSynced(w);
        continue;
      }
      if (w.minRev < 0) {
        // Only -1 before any compaction gets here. etcd encodes the start as an unsigned revision
        // key that sorts after every stored revision: its catch-up read is empty and the watcher
        // continues live from cur + 1, without history.
        w.minRev = cur + 1;
        this.toSynced(w);
        continue;
      }
      chosen.push(w);
      if (w.minRev < minRev) minRev = w.minRev;
    }
    let progressed = false;
    if (chosen.length > 0) {
      const { events, lastRev } = this.readEvents(minRev, cur);
      for (const w of chosen) if (this.deliverCatchUp(w, events, lastRev, cur)) progressed = true;
    }
    if (this.unsynced.size > 0) this.scheduleSync(progressed);
  }

  /** Events of revisions [fromRev, lastRev] from the backend, whole revisions, at most ~syncRowsMax rows. */
  private readEvents(fromRev: number, cur: number): { events: Event[]; lastRev: number } {
    const b = this.kv.backend;
    let rows = b.rowsBetween(firstOfMain(fromRev), lastOfMain(cur), this.o.syncRowsMax);
    let lastRev = cur;
    if (rows.length === this.o.syncRowsMax) {
      lastRev = revMain(rows[rows.length - 1]!.rev);
      if (revMain(rows[0]!.rev) === lastRev) {
        // One revision larger than the chunk: read it whole (bounded by the request size limits).
        rows = b.rowsBetween(firstOfMain(lastRev), lastOfMain(lastRev), Number.MAX_SAFE_INTEGER);
      } else {
        lastRev -= 1; // the last revision may be cut: leave it for the next pass
        rows = rows.filter((r) => revMain(r.rev) <= lastRev);
      }
    }
    const events: Event[] = rows.map((row) =>
      row.tombstone
        ? {
            type: EventType.DELETE,
            kv: { key: row.key, createRevision: 0, modRevision: revMain(row.rev), version: 0, value: EMPTY, lease: 0 },
          }
        : { type: EventType.PUT, kv: rowToKv(row) },
    );
    return { events, lastRev };
  }

  /** Sends one watcher its part of the chunk; true if it moved forward. */
  private deliverCatchUp(w: Watcher, events: Event[], lastRev: number, cur: number): boolean {
    const mine: Event[] = [];
    let revs = 0;
    let prevRev = -1;
    let upTo = lastRev;
    for (const ev of events) {
      const rev = ev.kv.modRevision;
      if (rev < w.minRev) continue;
      if (!w.contains(keyToString(ev.kv.key))) continue;
      if (ev.type === EventType.PUT ? w.filterPut : w.filterDelete) continue;
      if (rev !== prevRev) {
        if (revs === this.o.batchMaxRevs) {
          upTo = prevRev; // etcd watchBatchMaxRevs: the rest comes in the next pass
          break;
        }
        revs++;
        prevRev = rev;
      }
      mine.push(ev);
    }
    if (mine.length > 0) {
      const resp: WatchResponse = { watchId: w.id, events: mine, revision: cur };
      if (!w.sink.trySend(resp)) return false;
      w.sentSinceTick = true;
    }
    // The chunk may end below this watcher's own position: never move it backwards.
    if (upTo + 1 > w.minRev) w.minRev = upTo + 1;
    if (w.minRev > cur) this.toSynced(w);
    return true;
  }

  private toSynced(w: Watcher): void {
    this.unsynced.delete(w);
    w.state = WatcherState.SYNCED;
    this.synced.add(w);
  }

  /** Periodic progress notification for synced, idle watchers that asked for it. */
  progressTick(): void {
    if (this.closed || this.kv.isClosed) return;
    const rev = this.kv.currentRevision();
    for (const w of this.progressWatchers) {
      if (w.state === WatcherState.SYNCED && !w.sentSinceTick) w.sink.trySend({ watchId: w.id, events: [], revision: rev });
      w.sentSinceTick = false;
    }
  }

  /** After a snapshot restore: every synced watcher catches up from the new backend (etcd watchableStore.Restore). */
  private moveAllToUnsynced(): void {
    if (this.closed) return;
    for (const s of this.streams) {
      for (const w of s.liveWatchers()) {
        if (w.state !== WatcherState.SYNCED) continue;
        this.synced.delete(w);
        w.state = WatcherState.UNSYNCED;
        this.unsynced.add(w);
      }
    }
    this.scheduleSync(true);
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    for (const s of this.streams) s.close();
    this.streams.clear();
    if (this.syncTimer !== null) clearTimeout(this.syncTimer);
    if (this.progressTimer !== null) clearInterval(this.progressTimer);
    this.kv.setObserver(null);
  }
}
