/**
 * The snapshot format etcetera wrote before its snapshots became etcd's: `etcdctl snapshot save`
 * against an etcetera older than the bbolt writer (src/server/etcd_snapshot.ts, commit 720c826) got
 * the member's SQLite backend image followed by its SHA-256. That image is etcetera's own schema of
 * that time, not etcd's data: the snapshot tools do not read it, but name it instead of calling it
 * a broken bbolt file, and say what to do.
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

/** Throws an EtcdFileError naming the file and the format if `path` is an old etcetera SQLite snapshot. */
export function refuseSqliteSnapshot(path: string): void {
  if (!isSqliteFile(path)) return;
  throw new EtcdFileError(
    path,
    0,
    "an etcetera SQLite snapshot (the format etcetera's Maintenance.Snapshot sent before it wrote etcd 3.4's bbolt format), not an etcd snapshot: it cannot be read or restored; take a new one with 'etcdctl snapshot save' from a running member",
  );
}
