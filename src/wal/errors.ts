/**
 * Errors of the WAL and snapshot files. Message prefixes follow etcd's `wal:` / `snap:` errors so
 * operators recognise them; corruption errors always name the file and the byte offset, because a
 * node must refuse to start rather than lose acknowledged data silently.
 */

/** A record that cannot be trusted: CRC mismatch, bad header, gap, garbage after the end, ... */
export class WalCorruptionError extends Error {
  constructor(
    readonly file: string,
    readonly offset: number,
    readonly reason: string,
  ) {
    super(`wal: ${reason} in ${file} at offset ${offset}`);
    this.name = "WalCorruptionError";
  }
}

/** etcd's ErrSnapshotNotFound: the snapshot marker to replay from is not in the WAL. */
export class WalSnapshotNotFoundError extends Error {
  constructor(index: number, term: number) {
    super(`wal: snapshot not found (index ${index}, term ${term})`);
    this.name = "WalSnapshotNotFoundError";
  }
}

/** etcd's ErrSnapshotMismatch: a marker at the snapshot's index carries another term. */
export class WalSnapshotMismatchError extends Error {
  constructor(index: number, term: number, walTerm: number) {
    super(`wal: snapshot mismatch (index ${index}: snapshot term ${term}, wal term ${walTerm})`);
    this.name = "WalSnapshotMismatchError";
  }
}

/** etcd's ErrFileNotFound: no segment covers the requested index (released, or no WAL at all). */
export class WalFileNotFoundError extends Error {
  constructor(detail: string) {
    super(`wal: file not found (${detail})`);
    this.name = "WalFileNotFoundError";
  }
}

/** A snapshot file whose checksum or structure is wrong. */
export class SnapshotCorruptionError extends Error {
  constructor(
    readonly file: string,
    readonly reason: string,
  ) {
    super(`snap: ${reason} in ${file}`);
    this.name = "SnapshotCorruptionError";
  }
}

/**
 * Thrown for a violated invariant: a bug in the caller or in this module, never a disk fault.
 * A message that formats values is given as a function on per-entry paths: a template literal is
 * built before the call even when the condition holds (a number's decimal string and a
 * concatenation, ~0.3 µs), and the write path checks several invariants per entry on every member.
 */
export function assert(condition: boolean, message: string | (() => string)): asserts condition {
  if (!condition) throw new Error(`wal: assertion failed: ${typeof message === "string" ? message : message()}`);
}
