/**
 * A watch stream (etcd mvcc/watcher.go watchStream): the watchers of one
 * client stream and a bounded buffer of responses for them.
 *
 * The server creates and cancels watchers here and consumes responses either
 * with `next()` / `for await`, or with a handler (`setHandler`) that may ask to
 * pause by returning false (e.g. when grpc's write() says the socket is full)
 * until `resume()`. When the buffer is full, the store parks the watchers that
 * could not deliver and catches them up from the backend later: apply never
 * waits for a consumer.
 */

import { ErrEmptyWatcherRange, ErrWatcherDuplicateID, invariant } from './errors.js';
import { keyToString } from './tree_index.js';
import { bytesOf, type Event, EventType, numOf, type WatchId, watchIdOf, WatchFilterType } from './types.js';
import { FLAG_NODELETE, FLAG_NOPUT, FLAG_PREV_KV, FLAG_PROGRESS_NOTIFY, Watcher, type WatcherSink, type WatchResponse } from './watcher.js';

/** etcdserverpb.WatchCreateRequest as the stream needs it. */
export interface WatchCreate {
  key?: Uint8Array;
  rangeEnd?: Uint8Array;
  /** 0/absent: from the next revision. */
  startRevision?: number;
  prevKv?: boolean;
  /** WatchFilterType values; others (a newer client's) are ignored, as etcd's filter switch does. */
  filters?: number[];
  progressNotify?: boolean;
  /** Client-chosen id (any int64, exact: see WatchId); 0/absent: the stream picks one. */
  id?: WatchId;
}

/** What the stream needs from the watchable store. */
export interface WatchHost {
  addWatcher(w: Watcher): void;
  removeWatcher(w: Watcher): void;
  /** The buffer has room again: parked watchers may be caught up now. */
  kick(): void;
  /** prev_kv lookup: the key's kv at `rev`, if still readable. */
  prevKvAt(key: Uint8Array, rev: number): Event['kv'] | undefined;
}

export type WatchHandler = (resp: WatchResponse) => boolean | void;

export class WatchStream implements WatcherSink {
  /** Events queued to this stream's client so far (etcd_debugging_mvcc_events_total). */
  eventsSent = 0;
  private readonly watchers = new Map<WatchId, Watcher>();
  private readonly buffer: WatchResponse[] = [];
  private head = 0;
  private nextId = 0;
  private closed = false;
  private handler: WatchHandler | null = null;
  private paused = false;
  private draining = false;
  private waiter: ((r: WatchResponse | null) => void) | null = null;

  constructor(
    private readonly host: WatchHost,
    /** Max queued responses (etcd chanBufLen: 128). */
    readonly bufferMax: number,
  ) {
    invariant(bufferMax > 0, 'watch stream buffer must hold at least one response');
  }

  // ---- server side: watchers

  /** Creates a watcher and returns its id. Throws ErrEmptyWatcherRange / ErrWatcherDuplicateID. */
  watch(req: WatchCreate): WatchId {
    invariant(!this.closed, 'watch on a closed stream');
    let key = bytesOf(req.key);
    // etcd v3rpc: an empty key means "\0", the smallest key; rangeEnd "\0" means every key ≥ key.
    if (key.length === 0) key = Buffer.from([0]);
    const endBytes = bytesOf(req.rangeEnd);
    const start = keyToString(key);
    let end: string | undefined;
    if (endBytes.length === 1 && endBytes[0] === 0) end = '';
    else if (endBytes.length > 0) end = keyToString(endBytes);
    if (end !== undefined && end !== '' && start >= end) throw new ErrEmptyWatcherRange();
    // One representation per value (a number while safe), so the Map finds an id however it came.
    let id = watchIdOf(req.id);
    if (id === 0) {
      while (this.watchers.has(this.nextId)) this.nextId++;
      id = this.nextId++;
    } else if (this.watchers.has(id)) {
      throw new ErrWatcherDuplicateID();
    }
    let flags = 0;
    for (const f of req.filters ?? []) {
      if (f === WatchFilterType.NOPUT) flags |= FLAG_NOPUT;
      if (f === WatchFilterType.NODELETE) flags |= FLAG_NODELETE;
    }
    if (req.prevKv) flags |= FLAG_PREV_KV;
    if (req.progressNotify) flags |= FLAG_PROGRESS_NOTIFY;
    const w = new Watcher(id, start, end, numOf(req.startRevision), flags, this);
    this.watchers.set(id, w);
    this.host.addWatcher(w);
    return id;
  }

  /** Cancels a watcher; false if the id is unknown. Its queued responses are dropped. */
  cancel(id: WatchId): boolean {
    const w = this.watchers.get(watchIdOf(id));
    if (w === undefined) return false;
    this.watchers.delete(w.id);
    this.host.removeWatcher(w);
    return true;
  }

  liveWatchers(): IterableIterator<Watcher> {
    return this.watchers.values();
  }

  watcherIds(): WatchId[] {
    return [...this.watchers.keys()];
  }

  watcherCount(): number {
    return this.watchers.size;
  }

  /** Removes every watcher and wakes a pending next() with null. */
  close(): void {
    if (this.closed) return;
    for (const w of this.watchers.values()) this.host.removeWatcher(w);
    this.watchers.clear();
    this.closed = true;
    this.buffer.length = 0;
    this.head = 0;
    const wake = this.waiter;
    this.waiter = null;
    wake?.(null);
  }

  // ---- store side

  trySend(resp: WatchResponse): boolean {
    if (this.closed) return true; // nothing to deliver to; do not park
    if (!this.hasRoom()) return false;
    this.buffer.push(resp);
    this.eventsSent += resp.events.length;
    this.wake();
    return true;
  }

  hasRoom(): boolean {
    return this.buffer.length - this.head < this.bufferMax;
  }

  /** Queued responses not yet consumed. */
  get queued(): number {
    return this.buffer.length - this.head;
  }

  // ---- consumer side

  /** The next response, or null once the stream is closed. */
  next(): Promise<WatchResponse | null> {
    invariant(this.handler === null, 'next() and setHandler() are exclusive');
    invariant(this.waiter === null, 'one next() at a time');
    const r = this.take();
    if (r !== undefined) return Promise.resolve(r);
    if (this.closed) return Promise.resolve(null);
    return new Promise((resolve) => {
      this.waiter = resolve;
    });
  }

  async *[Symbol.asyncIterator](): AsyncIterator<WatchResponse> {
    for (;;) {
      const r = await this.next();
      if (r === null) return;
      yield r;
    }
  }

  /** Push mode: handler gets every response; returning false pauses delivery until resume(). */
  setHandler(handler: WatchHandler): void {
    invariant(this.waiter === null, 'next() and setHandler() are exclusive');
    this.handler = handler;
    this.wake();
  }

  resume(): void {
    this.paused = false;
    this.wake();
  }

  private wake(): void {
    if (this.waiter !== null) {
      const r = this.take();
      if (r !== undefined) {
        const w = this.waiter;
        this.waiter = null;
        w(r);
      }
      return;
    }
    if (this.handler !== null && !this.paused && !this.draining) {
      this.draining = true;
      // Deliver after the current apply finishes: the handler must not run inside it.
      queueMicrotask(() => this.drain());
    }
  }

  private drain(): void {
    this.draining = false;
    while (this.handler !== null && !this.paused) {
      const r = this.take();
      if (r === undefined) return;
      if (this.handler(r) === false) this.paused = true;
    }
  }

  /** Dequeues one response, dropping those of canceled watchers and filling prev_kv. */
  private take(): WatchResponse | undefined {
    while (this.head < this.buffer.length) {
      const r = this.buffer[this.head]!;
      this.buffer[this.head++] = undefined as unknown as WatchResponse;
      if (this.head > 1024 && this.head * 2 > this.buffer.length) {
        this.buffer.splice(0, this.head);
        this.head = 0;
      }
      if (this.queued === Math.floor(this.bufferMax / 2)) this.host.kick();
      // Every response here is a watcher's (a progress request is answered at the API edge, not
      // through this buffer), so a response whose watcher was canceled meanwhile is dropped,
      // whatever its id: -1 is an id like any other.
      const w = this.watchers.get(r.watchId);
      if (!r.canceled && w === undefined) continue;
      if (w !== undefined && w.prevKv && r.events.length > 0) return { ...r, events: r.events.map((e) => this.withPrevKv(e)) };
      return r;
    }
    if (this.head > 0) {
      this.buffer.length = 0;
      this.head = 0;
    }
    return undefined;
  }

  /** etcd fills prev_kv at send time from revision modRevision-1; creates (version 1) have none. */
  private withPrevKv(e: Event): Event {
    if (e.type === EventType.PUT && e.kv.version === 1) return e;
    const prev = this.host.prevKvAt(e.kv.key, e.kv.modRevision - 1);
    return prev === undefined ? e : { ...e, prevKv: prev };
  }
}
