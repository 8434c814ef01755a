/**
 * Writes etcd 3.4's backend (the bbolt `db` of a member, and the body of a snapshot) from plain
 * records, streaming: revisions and leases are consumed as they come (sync or async iterables)
 * and written page by page; the event loop gets a turn every `yieldEvery` records.
 */

import fs from "node:fs";
import { BoltWriter, FilePageSink, type BoltWriterOptions, type BoltWriteResult, type Pause, yieldEveryPause } from "../bbolt/index.js";
import {
  ALARM_BUCKET,
  AUTH_BUCKET,
  AUTH_ENABLED_KEY,
  AUTH_REVISION_KEY,
  AUTH_ROLES_BUCKET,
  AUTH_USERS_BUCKET,
  CLUSTER_BUCKET,
  CLUSTER_VERSION_KEY,
  CONSISTENT_INDEX_KEY,
  FINISHED_COMPACT_KEY,
  KEY_BUCKET,
  LEASE_BUCKET,
  MEMBER_REMOVED_VALUE,
  MEMBERS_BUCKET,
  MEMBERS_REMOVED_BUCKET,
  META_BUCKET,
  SCHEDULED_COMPACT_KEY,
} from "./buckets.js";
import {
  encodeAlarm,
  encodeKeyValue,
  encodeLease,
  encodeMember,
  encodeRole,
  encodeUser,
  leaseKey,
  memberKey,
  type EtcdAlarm,
  type EtcdLease,
  type EtcdMember,
  type EtcdRevisionRecord,
  type EtcdRole,
  type EtcdUser,
} from "./records.js";
import { encodeRevisionKey } from "./revision_key.js";
import { appendSnapshotHash } from "./snapshot_hash.js";

export interface EtcdAuthState {
  /** undefined: no authEnabled key (auth never enabled; etcd reads that as disabled). */
  readonly enabled: boolean | undefined;
  readonly revision: bigint;
  readonly users: readonly EtcdUser[];
  readonly roles: readonly EtcdRole[];
}

/** Everything an etcd 3.4 backend holds. */
export interface EtcdBackendContent {
  /** The key bucket: every stored revision, ascending by (main, sub). */
  readonly revisions: Iterable<EtcdRevisionRecord> | AsyncIterable<EtcdRevisionRecord>;
  /** The lease bucket, ascending by id (as a signed 64-bit number, the key's big-endian order for ids < 2^63). */
  readonly leases: Iterable<EtcdLease> | AsyncIterable<EtcdLease>;
  /** Raft index of the last applied entry. */
  readonly consistentIndex: bigint;
  /** Revision of the last compaction scheduled / finished (absent: none). */
  readonly scheduledCompactRevision?: number;
  readonly finishedCompactRevision?: number;
  readonly members?: readonly EtcdMember[];
  readonly removedMemberIds?: readonly bigint[];
  /** "3.4.0" in a 3.4 cluster; absent: not yet decided. */
  readonly clusterVersion?: string;
  readonly alarms?: readonly EtcdAlarm[];
  readonly auth?: EtcdAuthState;
}

export interface EtcdBackendWriteOptions extends BoltWriterOptions {
  /** Records between yields to the event loop; default 1000. */
  yieldEvery?: number;
  /** fsync the file before returning. */
  sync?: boolean;
}

export interface EtcdBackendWriteResult extends BoltWriteResult {
  /** Highest main revision in the key bucket (0 when empty). */
  readonly revision: number;
  readonly revisionsWritten: number;
  readonly leasesWritten: number;
}

function u64be(v: bigint): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt.asUintN(64, v), 0);
  return b;
}


/** Puts small, unsorted records sorted by their key bytes (bbolt needs ascending keys). */
function putSorted(w: BoltWriter, entries: { key: Uint8Array; value: Uint8Array }[]): void {
  entries.sort((a, b) => Buffer.compare(a.key, b.key));
  for (const e of entries) w.put(e.key, e.value);
}

/** Streams the content into `w` (no bucket begun); `pause` is called after every revision and lease. */
export async function writeEtcdBuckets(
  w: BoltWriter,
  content: EtcdBackendContent,
  pause: Pause,
): Promise<{ revision: number; revisionsWritten: number; leasesWritten: number }> {
  // Buckets in byte order of their names: alarm auth authRoles authUsers cluster key lease members members_removed meta.
  w.beginBucket(ALARM_BUCKET);
  putSorted(w, (content.alarms ?? []).map((a) => ({ key: encodeAlarm(a), value: new Uint8Array(0) })));
  w.endBucket();
  w.beginBucket(AUTH_BUCKET);
  if (content.auth) {
    if (content.auth.enabled !== undefined) w.put(AUTH_ENABLED_KEY, Uint8Array.of(content.auth.enabled ? 1 : 0));
    w.put(AUTH_REVISION_KEY, u64be(content.auth.revision));
  }
  w.endBucket();
  w.beginBucket(AUTH_ROLES_BUCKET);
  putSorted(w, (content.auth?.roles ?? []).map((r) => ({ key: r.name, value: encodeRole(r) })));
  w.endBucket();
  w.beginBucket(AUTH_USERS_BUCKET);
  putSorted(w, (content.auth?.users ?? []).map((u) => ({ key: u.name, value: encodeUser(u) })));
  w.endBucket();
  w.beginBucket(CLUSTER_BUCKET);
  if (content.clusterVersion !== undefined) w.put(CLUSTER_VERSION_KEY, content.clusterVersion);
  w.endBucket();

  w.beginBucket(KEY_BUCKET);
  let revision = 0;
  let revisionsWritten = 0;
  for await (const r of content.revisions) {
    // A tombstone stores only the key, as etcd's delete does.
    const kv = r.tombstone ? { key: r.kv.key, createRevision: 0, modRevision: 0, version: 0, value: new Uint8Array(0), lease: 0n } : r.kv;
    w.put(encodeRevisionKey(r.main, r.sub, r.tombstone), encodeKeyValue(kv));
    revision = r.main;
    revisionsWritten++;
    const p = pause();
    if (p) await p;
  }
  w.endBucket();

  w.beginBucket(LEASE_BUCKET);
  let leasesWritten = 0;
  for await (const l of content.leases) {
    w.put(leaseKey(l.id), encodeLease(l));
    leasesWritten++;
    const p = pause();
    if (p) await p;
  }
  w.endBucket();

  w.beginBucket(MEMBERS_BUCKET);
  putSorted(w, (content.members ?? []).map((m) => ({ key: Buffer.from(memberKey(m.id)), value: encodeMember(m) })));
  w.endBucket();
  w.beginBucket(MEMBERS_REMOVED_BUCKET);
  putSorted(w, (content.removedMemberIds ?? []).map((id) => ({ key: Buffer.from(memberKey(id)), value: Buffer.from(MEMBER_REMOVED_VALUE) })));
  w.endBucket();

  w.beginBucket(META_BUCKET);
  w.put(CONSISTENT_INDEX_KEY, u64be(content.consistentIndex));
  if (content.finishedCompactRevision !== undefined) w.put(FINISHED_COMPACT_KEY, encodeRevisionKey(content.finishedCompactRevision, 0));
  if (content.scheduledCompactRevision !== undefined) w.put(SCHEDULED_COMPACT_KEY, encodeRevisionKey(content.scheduledCompactRevision, 0));
  w.endBucket();
  return { revision, revisionsWritten, leasesWritten };
}

/** Writes a member's `db` file (no trailer). The file is complete only when the promise resolves. */
export async function writeEtcdBackend(path: string, content: EtcdBackendContent, options: EtcdBackendWriteOptions = {}): Promise<EtcdBackendWriteResult> {
  const sink = new FilePageSink(path);
  try {
    const w = new BoltWriter(sink, options);
    const counts = await writeEtcdBuckets(w, content, yieldEveryPause(options.yieldEvery ?? 1000));
    const result = w.finish();
    sink.close({ sync: options.sync ?? false });
    return { ...result, ...counts };
  } catch (err) {
    sink.close();
    fs.rmSync(path, { force: true });
    throw err;
  }
}

/** Writes a snapshot as `etcdctl snapshot save` stores one: the backend then its SHA-256. */
export async function writeEtcdSnapshot(
  path: string,
  content: EtcdBackendContent,
  options: EtcdBackendWriteOptions = {},
): Promise<EtcdBackendWriteResult & { sha256: Buffer }> {
  const result = await writeEtcdBackend(path, content, { ...options, sync: false });
  const sha256 = appendSnapshotHash(path);
  if (options.sync) {
    const fd = fs.openSync(path, "r");
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  }
  return { ...result, sha256 };
}
