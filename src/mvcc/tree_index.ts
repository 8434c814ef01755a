/**
 * treeIndex: key → keyIndex in a B-tree ordered by key bytes (etcd mvcc/index.go).
 *
 * Keys are held as latin1 strings: latin1 maps each byte to one UTF-16 code
 * unit 0..255, so JS string order is exactly byte order, and a short string
 * costs far less memory than a Buffer (no ArrayBuffer behind it).
 */

import { createRequire } from 'node:module';
import { invariant } from './errors.js';
import {
  type KeyIndex,
  kiAlive,
  kiCompact,
  kiGet,
  kiIsEmpty,
  kiKeep,
  kiNew,
  kiPut,
  kiRestore,
  kiTombstone,
} from './key_index.js';

/** Byte comparator over latin1-encoded keys. */
// sorted-btree is CommonJS with `exports.default`; ESM default-import interop differs between
// Node and vite, so load it through require, which behaves the same everywhere.
const BTree = (createRequire(import.meta.url)('sorted-btree') as typeof import('sorted-btree')).default;

export function compareKeys(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

export function keyToString(key: Uint8Array): string {
  // A Buffer (a decoded request's key) converts as it is: a view made for it cost as much again.
  if (Buffer.isBuffer(key)) return key.toString('latin1');
  return Buffer.from(key.buffer, key.byteOffset, key.byteLength).toString('latin1');
}

export function keyFromString(key: string): Buffer {
  return Buffer.from(key, 'latin1');
}

/**
 * A key range as the index sees it: `end` undefined → the single key;
 * `end` '' → every key ≥ start; otherwise [start, end).
 */
export interface KeyRange {
  start: string;
  end?: string;
}

export class TreeIndex {
  private tree = new BTree<string, KeyIndex>(undefined, compareKeys, 64);
  /**
   * Keys alive now (a put opened their current generation, no tombstone closed it): etcd's
   * keysGauge, which its keyIndex raises at a generation's first put and lowers at a tombstone.
   */
  private alive = 0;

  clear(): void {
    this.tree.clear();
    this.alive = 0;
  }

  /** Takes over the keys of `other` (a rebuild finished elsewhere: index_rebuild.ts); `other` is left empty. */
  adopt(other: TreeIndex): void {
    invariant(other !== this, 'an index cannot adopt itself');
    this.tree = other.tree;
    this.alive = other.alive;
    other.tree = new BTree<string, KeyIndex>(undefined, compareKeys, 64);
    other.alive = 0;
  }

  get size(): number {
    return this.tree.size;
  }

  /** Keys alive at the current revision (etcd_debugging_mvcc_keys_total). */
  get aliveCount(): number {
    return this.alive;
  }

  put(key: string, rev: number): void {
    this.putAfter(key, this.tree.get(key), rev);
  }

  /**
   * The key's history, for a write that reads the key's live revision and then records its put
   * (putAfter): one lookup in the tree for both instead of two (a put's B-tree descents were the
   * largest share of a follower's apply under put load: bench/compare/profile.ts, issue 18).
   */
  history(key: string): KeyIndex | undefined {
    return this.tree.get(key);
  }

  /**
   * put, given the history that history(key) returned with no change to the index since (the
   * caller's synchronous write in between touches only the backend).
   */
  putAfter(key: string, ki: KeyIndex | undefined, rev: number): void {
    if (ki === undefined) {
      this.tree.set(key, kiNew(rev));
      this.alive++;
      return;
    }
    if (!kiAlive(ki)) this.alive++;
    const next = kiPut(ki, rev);
    if (next !== ki) this.tree.set(key, next);
  }

  /** Records a delete; false if the key was not alive (nothing recorded). */
  tombstone(key: string, rev: number): boolean {
    const ki = this.tree.get(key);
    if (ki === undefined) return false;
    const next = kiTombstone(ki, rev);
    if (next === null) return false;
    this.tree.set(key, next);
    this.alive--;
    return true;
  }

  /** Packed revision of `key` visible at main revision atRev, or -1. */
  get(key: string, atRev: number): number {
    const ki = this.tree.get(key);
    return ki === undefined ? -1 : kiGet(ki, atRev);
  }

  isAlive(key: string): boolean {
    const ki = this.tree.get(key);
    return ki !== undefined && kiAlive(ki);
  }

  /**
   * Visits, in key order, each key of the range visible at atRev with its
   * revision; stop by returning false.
   */
  visitRange(range: KeyRange, atRev: number, visit: (key: string, rev: number) => boolean | void): void {
    if (range.end === undefined) {
      const rev = this.get(range.start, atRev);
      if (rev >= 0) visit(range.start, rev);
      return;
    }
    this.forEachKey(range, (key, ki) => {
      const rev = kiGet(ki, atRev);
      if (rev < 0) return true;
      return visit(key, rev);
    });
  }

  /**
   * visitRange in slices, for reads spread over several turns: visits the keys of the range after
   * `after` (exclusive; null = from the start) that are visible at atRev, looking at no more than
   * `keysMax` keys; `visit` returns false to stop after its key. Returns the last key looked at
   * when the slice stopped early, null when the range is done. Keys created or deleted after atRev
   * between two slices change nothing at atRev; compaction above atRev must wait (the caller's job).
   */
  visitRangeSlice(
    range: KeyRange,
    atRev: number,
    after: string | null,
    keysMax: number,
    visit: (key: string, rev: number) => boolean,
  ): string | null {
    invariant(keysMax > 0, 'a range slice must look at one key at least');
    if (range.end === undefined) {
      if (after === null) this.visitRange(range, atRev, visit);
      return null;
    }
    let looked = 0;
    let last: string | null = null;
    let stopped = false;
    const from = after === null ? range : { start: after, end: range.end };
    this.forEachKey(from, (key, ki) => {
      if (key === after) return true;
      if (looked === keysMax) {
        stopped = true;
        return false;
      }
      looked++;
      last = key;
      const rev = kiGet(ki, atRev);
      if (rev < 0) return true;
      if (visit(key, rev)) return true;
      stopped = true;
      return false;
    });
    return stopped ? last : null;
  }

  /** Visits every keyIndex of the range (alive or not) in key order; stop by returning false. */
  forEachKey(range: KeyRange, visit: (key: string, ki: KeyIndex) => boolean | void): void {
    if (this.tree.size === 0) return;
    if (range.end !== undefined && range.end !== '' && compareKeys(range.start, range.end) >= 0) return;
    const high = range.end === undefined ? range.start : range.end === '' ? this.tree.maxKey()! : range.end;
    const includeHigh = range.end === undefined || range.end === '';
    this.tree.forRange(range.start, high, includeHigh, (k, v) => {
      if (visit(k, v) === false) return { break: true };
      return undefined;
    });
  }

  /** Rebuild after restart from one backend row, in revision order (etcd restoreIntoIndex). */
  restore(key: string, rev: number, tombstone: boolean, createRev: number, version: number): void {
    const ki = this.tree.get(key);
    if (ki === undefined) {
      // A tombstone whose key is unknown lost its history to compaction: nothing to rebuild.
      if (!tombstone) {
        this.tree.set(key, kiRestore(createRev, rev, version));
        this.alive++;
      }
      return;
    }
    if (tombstone) {
      this.tombstone(key, rev);
      return;
    }
    this.put(key, rev);
  }

  /**
   * Compacts keys strictly after `afterKey` (or from the first key when null)
   * at main revision atRev, stopping once `maxKeys` index keys were visited or
   * `maxKeys` revisions were dropped (etcd's batch limit counts backend keys,
   * i.e. revisions). Reports every dropped revision. Returns the last key
   * processed, or null when the end was reached.
   */
  compactBatch(afterKey: string | null, atRev: number, maxKeys: number, removed: (rev: number) => void): string | null {
    invariant(maxKeys > 0, 'compaction batch must hold at least one key');
    // The tree must not change under its iterator: decide first, then apply.
    const changes: [string, KeyIndex | null, KeyIndex][] = [];
    const dropped: number[] = [];
    let last: string | null = null;
    let reachedEnd = true;
    const it = this.tree.entries(afterKey ?? undefined);
    for (let r = it.next(); !r.done; r = it.next()) {
      const [k, ki] = r.value;
      if (afterKey !== null && k === afterKey) continue;
      if (changes.length >= maxKeys || dropped.length >= maxKeys) {
        reachedEnd = false;
        break;
      }
      invariant(!kiIsEmpty(ki), 'empty keyIndex left in the tree');
      const before = dropped.length;
      const next = kiCompact(ki, atRev, (rev) => dropped.push(rev));
      if (dropped.length !== before || next === null) changes.push([k, next, ki]);
      else changes.push([k, ki, ki]);
      last = k;
    }
    for (const [k, next, old] of changes) {
      // Compaction drops only history: a key leaves the tree only once a tombstone ended it.
      invariant(next === null ? !kiAlive(old) : kiAlive(next) === kiAlive(old), 'compaction changed whether a key is alive');
      if (next === null) this.tree.delete(k);
      else if (next !== old) this.tree.set(k, next);
    }
    dropped.forEach(removed);
    return reachedEnd ? null : last;
  }

  /** Revisions ≤ atRev that a compaction at atRev keeps, one at most per key (etcd treeIndex.Keep). */
  keep(atRev: number): Set<number> {
    const out = new Set<number>();
    this.tree.forEach((ki) => {
      const r = kiKeep(ki, atRev);
      if (r >= 0) out.add(r);
    });
    return out;
  }
}
