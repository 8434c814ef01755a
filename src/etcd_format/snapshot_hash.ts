/**
 * The integrity trailer of an etcd snapshot: Maintenance.Snapshot streams the bbolt file and then
 * the SHA-256 of every byte sent, and `etcdctl snapshot save` writes both to the file. etcd's
 * restore recognises the trailer by size alone (`size % 512 == 32`: a bbolt file is whole pages)
 * and refuses a file whose digest does not match.
 */

import { createHash } from "node:crypto";
import fs from "node:fs";

export const SNAPSHOT_HASH_BYTES = 32;
const READ_CHUNK_BYTES = 1 << 20;

export class SnapshotHashError extends Error {
  readonly file: string;
  readonly offset: number;
  constructor(file: string, offset: number, reason: string) {
    super(`etcd snapshot ${file}: byte offset ${offset}: ${reason}`);
    this.name = "SnapshotHashError";
    this.file = file;
    this.offset = offset;
  }
}

/** etcd's rule (snapshot restore): a file this size ends in a SHA-256 trailer. */
export function hasSnapshotHash(sizeBytes: number): boolean {
  return sizeBytes % 512 === SNAPSHOT_HASH_BYTES;
}

/** SHA-256 of the first `length` bytes of an open file, read in bounded chunks. */
export function sha256OfPrefix(fd: number, length: number): Buffer {
  const h = createHash("sha256");
  const buf = Buffer.allocUnsafe(Math.min(READ_CHUNK_BYTES, Math.max(length, 1)));
  let pos = 0;
  while (pos < length) {
    const n = fs.readSync(fd, buf, 0, Math.min(buf.length, length - pos), pos);
    if (n === 0) break;
    h.update(buf.subarray(0, n));
    pos += n;
  }
  if (pos !== length) throw new Error(`file ended at ${pos}, ${length} bytes expected`);
  return h.digest();
}

/**
 * Checks a snapshot file's trailer. Returns the size of the bbolt part: the whole file when it
 * has no trailer (a member's `db`) and `required` is false.
 */
export function verifySnapshotHash(path: string, options: { required?: boolean } = {}): { dbBytes: number; hashed: boolean } {
  const fd = fs.openSync(path, "r");
  try {
    const size = fs.fstatSync(fd).size;
    if (!hasSnapshotHash(size)) {
      if (options.required) {
        throw new SnapshotHashError(path, size, `no SHA-256 trailer (size ${size} is not whole 512-byte blocks plus ${SNAPSHOT_HASH_BYTES})`);
      }
      return { dbBytes: size, hashed: false };
    }
    const dbBytes = size - SNAPSHOT_HASH_BYTES;
    const want = Buffer.alloc(SNAPSHOT_HASH_BYTES);
    fs.readSync(fd, want, 0, SNAPSHOT_HASH_BYTES, dbBytes);
    const got = sha256OfPrefix(fd, dbBytes);
    if (!got.equals(want)) {
      throw new SnapshotHashError(path, dbBytes, `SHA-256 trailer ${want.toString("hex")} does not match the database (${got.toString("hex")})`);
    }
    return { dbBytes, hashed: true };
  } finally {
    fs.closeSync(fd);
  }
}

/** Appends the trailer to a finished bbolt file, making it a snapshot etcd's restore accepts. */
export function appendSnapshotHash(path: string): Buffer {
  const fd = fs.openSync(path, "r+");
  try {
    const size = fs.fstatSync(fd).size;
    const digest = sha256OfPrefix(fd, size);
    fs.writeSync(fd, digest, 0, digest.length, size);
    return digest;
  } finally {
    fs.closeSync(fd);
  }
}
