/**
 * keyIndex: the revision history of one key as generations, after etcd's
 * mvcc/key_index.go. A generation is one life of the key: created by a put on
 * an absent key, ended by a tombstone (delete), after which an empty generation
 * starts. The last generation is the current one.
 *
 * Memory matters (one keyIndex per key, millions of keys), so a keyIndex is a
 * flat array of doubles: for each generation [created, ver, n, rev_1..rev_n],
 * revisions packed (see revision.ts) and `created` the main revision of the generation's first
 * put (a kv's create_revision, as the row holds it). A key that was put once costs one
 * 4-element array. While small, an array is replaced by an exact-size copy on each change: a
 * push would grow its backing store by ~1.5× + 16 slots (a key's second revision cost 152 bytes
 * that way, 8 copied exactly; etcd's c2 is ~30). Large ones grow in place (amortized).
 *
 * Example: put(2) put(3) delete(4) put(5) →
 *   [2,3,3, 2,3,4,  5,1,1, 5]   (ver counts the tombstone, as in etcd)
 */

import { invariant } from './errors.js';
import { revMain } from './revision.js';

export type KeyIndex = number[];

const SMALL_ARRAY_MAX = 32;

/** A keyIndex whose first revision is `rev` (a put on a new key). */
export function kiNew(rev: number): KeyIndex {
  return [revMain(rev), 1, 1, rev];
}

/** Rebuilt from a surviving backend row (etcd keyIndex.restore): the generation's older revisions may be compacted away. */
export function kiRestore(created: number, rev: number, ver: number): KeyIndex {
  return [created, ver, 1, rev];
}

export function kiIsEmpty(ki: KeyIndex): boolean {
  return ki.length === 3 && ki[2] === 0;
}

function lastGenOffset(ki: KeyIndex): number {
  let o = 0;
  for (;;) {
    const next = o + 3 + ki[o + 2]!;
    if (next >= ki.length) return o;
    o = next;
  }
}

/** The latest revision recorded for the key (put or tombstone), 0 if none. */
export function kiModified(ki: KeyIndex): number {
  const o = lastGenOffset(ki);
  if (ki[o + 2]! > 0) return ki[ki.length - 1]!;
  return o === 0 ? 0 : ki[o - 1]!;
}

/** `ki` with room for `extra` more elements at its end: an exact-size copy while small, else itself. */
function withRoom(ki: KeyIndex, extra: number): KeyIndex {
  if (ki.length >= SMALL_ARRAY_MAX) return ki;
  const out = new Array<number>(ki.length + extra);
  for (let i = 0; i < ki.length; i++) out[i] = ki[i]!;
  return out;
}

/**
 * Appends `rev` to the last generation (at offset `o`), leaving `extra` more slots after it for
 * the caller to fill; returns the array to keep (may be a new one).
 */
function appendRev(ki: KeyIndex, o: number, rev: number, extra: number): KeyIndex {
  invariant(rev > kiModified(ki), 'keyIndex put revision must exceed the modified revision');
  const n = ki.length;
  const out = withRoom(ki, 1 + extra);
  out[n] = rev;
  if (out[o + 2] === 0) out[o] = revMain(rev);
  out[o + 1]!++;
  out[o + 2]!++;
  return out;
}

/** Records a put at `rev`; returns the array to keep (may be a new one). */
export function kiPut(ki: KeyIndex, rev: number): KeyIndex {
  return appendRev(ki, lastGenOffset(ki), rev, 0);
}

/** Records a delete at `rev` and opens an empty generation; null if the key is not alive (nothing to delete). */
export function kiTombstone(ki: KeyIndex, rev: number): KeyIndex | null {
  const o = lastGenOffset(ki);
  if (ki[o + 2] === 0) return null;
  const n = ki.length;
  const out = appendRev(ki, o, rev, 3);
  out[n + 1] = 0;
  out[n + 2] = 0;
  out[n + 3] = 0;
  invariant(out.length === n + 4, 'keyIndex tombstone left a hole');
  return out;
}

/**
 * The create revision (main) of the key's current generation: a put takes it from here as etcd's
 * keyIndex.get hands it over, instead of reading the live row back (issue 18). The key must be alive.
 */
export function kiCreated(ki: KeyIndex): number {
  const o = lastGenOffset(ki);
  invariant(ki[o + 2]! > 0, 'keyIndex create revision of a key that is not alive');
  return ki[o]!;
}

/** The version of the key's live revision (puts in the current generation). The key must be alive. */
export function kiVersion(ki: KeyIndex): number {
  const o = lastGenOffset(ki);
  invariant(ki[o + 2]! > 0, 'keyIndex version of a key that is not alive');
  return ki[o + 1]!;
}

/** True if the key is alive (current generation non-empty). */
export function kiAlive(ki: KeyIndex): boolean {
  return ki[lastGenOffset(ki) + 2]! > 0;
}

/** Offsets of all generations, first to last. */
function genOffsets(ki: KeyIndex): number[] {
  const offs: number[] = [];
  for (let o = 0; o < ki.length; o += 3 + ki[o + 2]!) offs.push(o);
  return offs;
}

/**
 * The revision of the key visible at main revision `atRev` (the latest put
 * ≤ atRev in a generation not yet ended by then), or -1 if the key did not exist.
 */
export function kiGet(ki: KeyIndex, atRev: number): number {
  const n0 = ki[2]!;
  if (3 + n0 === ki.length) {
    // Single generation (the common case): no tombstone to consider.
    return walkBack(ki, 0, atRev);
  }
  const offs = genOffsets(ki);
  const last = offs.length - 1;
  for (let g = last; g >= 0; g--) {
    const o = offs[g]!;
    const n = ki[o + 2]!;
    if (n === 0) continue;
    if (g !== last && revMain(ki[o + 2 + n]!) <= atRev) return -1; // the key was deleted by then
    if (revMain(ki[o + 3]!) <= atRev) return walkBack(ki, o, atRev);
  }
  return -1;
}

function walkBack(ki: KeyIndex, o: number, atRev: number): number {
  for (let i = o + 2 + ki[o + 2]!; i > o + 2; i--) {
    if (revMain(ki[i]!) <= atRev) return ki[i]!;
  }
  return -1;
}

interface Generation {
  created: number;
  ver: number;
  revs: number[];
}

function decode(ki: KeyIndex): Generation[] {
  return genOffsets(ki).map((o) => ({
    created: ki[o]!,
    ver: ki[o + 1]!,
    revs: ki.slice(o + 3, o + 3 + ki[o + 2]!),
  }));
}

/** The flat form, exact size (a compacted key's array is kept for as long as the key lives). */
function encode(gens: Generation[]): KeyIndex {
  let len = 0;
  for (const g of gens) len += 3 + g.revs.length;
  // A long history is pushed (V8 makes a large preallocated array a slow dictionary).
  const out = len < SMALL_ARRAY_MAX ? new Array<number>(len) : [];
  let i = 0;
  for (const g of gens) {
    out[i++] = g.created;
    out[i++] = g.ver;
    out[i++] = g.revs.length;
    for (const r of g.revs) out[i++] = r;
  }
  return out;
}

/** etcd doCompact: the generation holding atRev (or the first created after it) and the kept revision's index in it. */
function doCompact(gens: Generation[], atRev: number): { genIdx: number; revIndex: number } {
  let genIdx = 0;
  while (genIdx < gens.length - 1) {
    const revs = gens[genIdx]!.revs;
    if (revMain(revs[revs.length - 1]!) > atRev) break;
    genIdx++;
  }
  const revs = gens[genIdx]!.revs;
  let revIndex = -1;
  for (let i = revs.length - 1; i >= 0; i--) {
    if (revMain(revs[i]!) <= atRev) {
      revIndex = i;
      break;
    }
  }
  return { genIdx, revIndex };
}

/** The one revision ≤ atRev that compaction at atRev keeps for this key, or -1 (etcd keyIndex.keep). */
export function kiKeep(ki: KeyIndex, atRev: number): number {
  if (kiIsEmpty(ki)) return -1;
  const gens = decode(ki);
  const { genIdx, revIndex } = doCompact(gens, atRev);
  const g = gens[genIdx]!;
  if (g.revs.length === 0 || revIndex === -1) return -1;
  const remaining = g.revs.length - revIndex;
  if (remaining === 1 && genIdx !== gens.length - 1) return -1; // a tombstone is never kept
  return g.revs[revIndex]!;
}

/**
 * Compacts at main revision atRev (etcd keyIndex.compact): drops every revision
 * older than the latest one ≤ atRev, and drops that one too when it is a
 * tombstone. Reports each dropped revision; returns null when nothing is left.
 */
export function kiCompact(ki: KeyIndex, atRev: number, removed: (rev: number) => void): KeyIndex | null {
  invariant(!kiIsEmpty(ki), 'compacting an empty keyIndex');
  const gens = decode(ki);
  const found = doCompact(gens, atRev);
  let genIdx = found.genIdx;
  const revIndex = found.revIndex;
  for (let i = 0; i < genIdx; i++) gens[i]!.revs.forEach(removed);
  const g = gens[genIdx]!;
  if (g.revs.length > 0) {
    if (revIndex > 0) {
      g.revs.slice(0, revIndex).forEach(removed);
      g.revs = g.revs.slice(revIndex);
    }
    if (g.revs.length === 1 && genIdx !== gens.length - 1) {
      // Only a tombstone ≤ atRev can be alone in an ended generation.
      invariant(revMain(g.revs[0]!) <= atRev, 'ended generation reduced to a revision above the compaction');
      removed(g.revs[0]!);
      genIdx++;
    }
  }
  const left = gens.slice(genIdx);
  if (left.length === 1 && left[0]!.revs.length === 0) return null;
  return encode(left);
}

/** All revisions recorded, oldest first (tests and invariant checks). */
export function kiRevisions(ki: KeyIndex): number[] {
  return decode(ki).flatMap((g) => g.revs);
}
