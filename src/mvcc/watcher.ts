/**
 * One watcher (etcd mvcc/watcher.go): a key or key range, the next revision it
 * must receive (minRev), its filters, and the stream it delivers to.
 */

import type { Event, WatchId } from './types.js';

/** What a stream hands to the server for one watcher (etcd mvcc.WatchResponse). */
export interface WatchResponse {
  watchId: WatchId;
  events: Event[];
  /** The store revision this response is current to. */
  revision: number;
  /** Set when the watcher was canceled because its start revision was compacted. */
  compactRevision?: number;
  canceled?: boolean;
}

/** Where a watcher delivers: implemented by WatchStream. */
export interface WatcherSink {
  /** Queues a response; false when the stream's buffer is full (nothing queued). */
  trySend(resp: WatchResponse): boolean;
  /** True when there is room for at least one more response. */
  hasRoom(): boolean;
}

export const enum WatcherState {
  SYNCED = 0,
  UNSYNCED = 1,
  CANCELED = 2,
  /**
   * Its next revision was compacted: out of the store's groups and told so once, but still its
   * stream's until the client cancels it (etcd's w.compacted): its id stays taken, a cancel of it
   * is answered, and etcd's watcher gauge still counts it.
   */
  COMPACTED = 3,
}

export class Watcher {
  /** Events before this main revision were already delivered (or filtered). */
  minRev: number;
  state: WatcherState = WatcherState.UNSYNCED;
  /** Whether anything was sent since the last progress tick. */
  sentSinceTick = false;

  constructor(
    readonly id: WatchId,
    /** latin1 key (see tree_index.ts). */
    readonly key: string,
    /** undefined: single key; '': every key ≥ key; else exclusive end. */
    readonly end: string | undefined,
    startRev: number,
    /** Bit 0: NOPUT, bit 1: NODELETE, bit 2: prevKv, bit 3: progressNotify (packed to keep idle watchers small). */
    readonly flags: number,
    readonly sink: WatcherSink,
  ) {
    this.minRev = startRev;
  }

  get filterPut(): boolean {
    return (this.flags & 1) !== 0;
  }
  get filterDelete(): boolean {
    return (this.flags & 2) !== 0;
  }
  get prevKv(): boolean {
    return (this.flags & 4) !== 0;
  }
  get progressNotify(): boolean {
    return (this.flags & 8) !== 0;
  }

  contains(key: string): boolean {
    if (this.end === undefined) return key === this.key;
    if (key < this.key) return false;
    return this.end === '' || key < this.end;
  }
}

export const FLAG_NOPUT = 1;
export const FLAG_NODELETE = 2;
export const FLAG_PREV_KV = 4;
export const FLAG_PROGRESS_NOTIFY = 8;
