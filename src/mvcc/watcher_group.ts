/**
 * A set of watchers indexed for event matching (etcd mvcc/watcher_group.go):
 * single-key watchers by key, range watchers grouped by identical range.
 * Matching a key is one map lookup plus a scan over the distinct ranges;
 * etcd uses an interval tree there, which matters only with many distinct
 * ranges.
 */

import type { Watcher } from './watcher.js';

interface RangeBucket {
  start: string;
  end: string;
  watchers: Set<Watcher>;
}

export class WatcherGroup {
  /** A lone watcher is stored bare: most keys have one watcher, and a Set costs ~100 bytes. */
  private readonly keyWatchers = new Map<string, Watcher | Set<Watcher>>();
  private readonly ranges = new Map<string, RangeBucket>();
  private count = 0;

  get size(): number {
    return this.count;
  }

  add(w: Watcher): void {
    this.count++;
    if (w.end === undefined) {
      const cur = this.keyWatchers.get(w.key);
      if (cur === undefined) this.keyWatchers.set(w.key, w);
      else if (cur instanceof Set) cur.add(w);
      else this.keyWatchers.set(w.key, new Set([cur, w]));
      return;
    }
    const id = JSON.stringify([w.key, w.end]);
    let bucket = this.ranges.get(id);
    if (bucket === undefined) {
      bucket = { start: w.key, end: w.end, watchers: new Set() };
      this.ranges.set(id, bucket);
    }
    bucket.watchers.add(w);
  }

  delete(w: Watcher): boolean {
    if (w.end === undefined) {
      const cur = this.keyWatchers.get(w.key);
      if (cur === w) {
        this.keyWatchers.delete(w.key);
      } else if (cur instanceof Set && cur.delete(w)) {
        if (cur.size === 1) this.keyWatchers.set(w.key, cur.values().next().value!);
      } else {
        return false;
      }
      this.count--;
      return true;
    }
    const id = JSON.stringify([w.key, w.end]);
    const bucket = this.ranges.get(id);
    if (bucket === undefined || !bucket.watchers.delete(w)) return false;
    if (bucket.watchers.size === 0) this.ranges.delete(id);
    this.count--;
    return true;
  }

  /** Calls visit for every watcher whose key or range contains `key`. */
  forEachMatching(key: string, visit: (w: Watcher) => void): void {
    const cur = this.keyWatchers.get(key);
    if (cur !== undefined) {
      if (cur instanceof Set) cur.forEach(visit);
      else visit(cur);
    }
    for (const bucket of this.ranges.values()) {
      if (key >= bucket.start && (bucket.end === '' || key < bucket.end)) bucket.watchers.forEach(visit);
    }
  }
}
