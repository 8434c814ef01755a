/**
 * etcetera's own SQLite backend where etcd's bbolt file is read: a member's `member/snap/db`, or the
 * snapshot format etcetera wrote before its snapshots became etcd's (`etcdctl snapshot save`
 * against an etcetera older than the bbolt writer, commit 720c826, got that SQLite file followed by
 * its SHA-256). etcetera's `snapshot status` and `snapshot restore` read it
 * (src/server/sqlite_image.ts); the readers of etcd's format name it instead of calling it a broken
 * bbolt file, and say which tool reads it.
 */
import { closeSync, openSync, readSync } from "node:fs";
import { EtcdFileError } from "./file_error.js";

/** The first 16 bytes of every SQLite 3 database file. */
const SQLITE_HEADER = Buffer.from("SQLite format 3\0", "latin1");

/** True if `path` starts as a SQLite database does. */
export function isSqliteFile(path: string): boolean {
  const fd = openSync(path, "r");
  try {
    const head = Buffer.alloc(SQLITE_HEADER.length);
    return readSync(fd, head, 0, head.length, 0) === head.length && head.equals(SQLITE_HEADER);
  } finally {
    closeSync(fd);
  }
}

/** Throws an EtcdFileError naming the file and the format if `path` is an etcetera SQLite backend or snapshot. */
export function refuseSqliteSnapshot(path: string): void {
  if (!isSqliteFile(path)) return;
  throw new EtcdFileError(
    path,
    0,
    "an etcetera SQLite backend (a member's member/snap/db, or a snapshot etcetera sent before it wrote etcd 3.4's bbolt format), not etcd's bbolt format: read it with etcetera's 'node dist/server.js snapshot status|restore', or take an etcd-format snapshot with 'etcdctl snapshot save' from a running member",
  );
}
