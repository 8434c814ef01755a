/**
 * A client's snapshot (Maintenance.Snapshot, `etcdctl snapshot save`) in etcd 3.4's format: the
 * backend's SQLite tables read as etcd's bbolt buckets, so `etcdctl snapshot status` and
 * `etcdctl snapshot restore` work on it and real etcd starts on the restored data dir.
 *
 * Everything is read inside one read transaction of a second connection (Backend.withReadTransaction):
 * one consistent point, the applied state at the call, while applies continue. The snapshot
 * stream reads its content twice (a planning pass, then the bytes; bbolt/stream.ts), both times
 * from that transaction. Rows are read in pages of PAGE_ROWS (bounded memory whatever the
 * backend's size) and the stream yields to the event loop between records.
 *
 * The tables are the stores' own (mvcc's kv and meta, the lessor's lease, alarms, membership):
 * this file is the one place that knows how each maps onto etcd's buckets.
 */
import type { Database } from "better-sqlite3";
import type { Backend } from "../backend/backend.js";
import type { EtcdAlarm, EtcdAuthState, EtcdBackendContent, EtcdLease, EtcdMember, EtcdRevisionRecord, SnapshotChunk, SnapshotStreamResult } from "../etcd_format/index.js";
import { decodeRole, decodeUser, streamEtcdSnapshot } from "../etcd_format/index.js";
import { META_CONSISTENT_INDEX } from "../mvcc/kvstore.js";
import { META_FINISHED_COMPACT, META_SCHEDULED_COMPACT } from "../mvcc/kvstore_compaction.js";
import { revMain, revSub } from "../mvcc/revision.js";
import { leaseColumnSql, leaseFromColumn } from "../mvcc/types.js";
import { idFromSqlite } from "./member.js";
import { decodeMember } from "./membership.js";

/** Rows per page read from a table (a page is the most of a table held in memory at once). */
const PAGE_ROWS = 256;
/** Records between turns of the event loop (about 10 ms of work with 1 KB values). */
const YIELD_EVERY = 256;

/**
 * The cluster bucket's version as etcd 3.4 writes it (major.minor.0 of the cluster): the layout
 * written here is 3.4's.
 */
const CLUSTER_VERSION = "3.4.0";

/**
 * The auth buckets of an etcd 3.4 that never enabled auth: NewAuthStore creates the three buckets
 * and commits auth revision 1; authEnabled is written only by AuthEnable/AuthDisable.
 */
const AUTH_NEVER_ENABLED = { enabled: undefined, revision: 1n, users: [], roles: [] } as const;

/**
 * The auth store's tables (src/auth/store.ts) as etcd's auth, authRoles and authUsers buckets: the
 * users and roles are stored as etcd's authpb bytes already and go over unchanged (bcrypt hashes
 * included), so a restored etcd enforces the same users, roles and permissions. authEnabled is
 * present once auth was enabled or disabled, as in etcd. The store counts its revision from 0
 * where etcd's NewAuthStore starts at 1: an untouched store is written as etcd's 1.
 */
function authState(db: Database): EtcdAuthState {
  const hasAuth = db.prepare<[], number>("SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('auth', 'auth_users', 'auth_roles')").pluck().get() === 3;
  if (!hasAuth) return AUTH_NEVER_ENABLED;
  const meta = new Map(
    db
      .prepare<[], { key: string; value: number }>("SELECT key, value FROM auth")
      .all()
      .map((r) => [r.key, r.value] as const),
  );
  const enabled = meta.get("enabled");
  return {
    enabled: enabled === undefined ? undefined : enabled === 1,
    revision: BigInt(Math.max(1, meta.get("revision") ?? 0)),
    users: db.prepare<[], Buffer>("SELECT user FROM auth_users ORDER BY name").pluck().all().map((u) => decodeUser(u)),
    roles: db.prepare<[], Buffer>("SELECT role FROM auth_roles ORDER BY name").pluck().all().map((r) => decodeRole(r)),
  };
}

type KvRaw = [number, Buffer, Buffer | null, number, number, number | string, number];

/** Every row of the kv table in revision order, a page at a time. */
function* revisions(db: Database): Generator<EtcdRevisionRecord> {
  const page = db.prepare<[number, number], KvRaw>(`SELECT rev, key, value, create_rev, version, ${leaseColumnSql("lease")}, tombstone FROM kv WHERE rev > ? ORDER BY rev LIMIT ?`).raw();
  let after = -1;
  for (;;) {
    const rows = page.all(after, PAGE_ROWS);
    for (const [rev, key, value, createRev, version, lease, tombstone] of rows) {
      const main = revMain(rev);
      yield {
        main,
        sub: revSub(rev),
        tombstone: tombstone !== 0,
        kv: { key, createRevision: createRev, modRevision: main, version, value: value ?? Buffer.alloc(0), lease: BigInt(leaseFromColumn(lease)) },
      };
    }
    if (rows.length < PAGE_ROWS) return;
    after = rows[rows.length - 1]![0];
  }
}

/**
 * Every lease in the lease bucket's key order (the id's 8 big-endian bytes: the ids >= 0 ascending,
 * then the negative ones ascending), a page at a time. Ids are read as text: they use all 64 bits.
 */
function* leases(db: Database): Generator<EtcdLease> {
  const page = db.prepare<[bigint, bigint, number], { id: string; ttl: number; remaining_ttl: number }>(
    "SELECT CAST(id AS TEXT) AS id, ttl, remaining_ttl FROM lease WHERE lease.id >= ? AND lease.id <= ? ORDER BY lease.id LIMIT ?",
  );
  for (const [first, last] of [[0n, INT64_MAX], [INT64_MIN, -1n]] as const) {
    for (let from = first; ; ) {
      const rows = page.all(from, last, PAGE_ROWS);
      for (const r of rows) yield { id: BigInt(r.id), ttl: r.ttl, remainingTtl: r.remaining_ttl };
      const end = rows.length < PAGE_ROWS ? last : BigInt(rows[rows.length - 1]!.id);
      if (end === last) break;
      from = end + 1n;
    }
  }
}

const INT64_MAX = 2n ** 63n - 1n;
const INT64_MIN = -(2n ** 63n);

function metaRevision(db: Database, name: string): number | undefined {
  const v = db.prepare<[string], unknown>("SELECT value FROM meta WHERE name = ?").pluck().get(name);
  return typeof v === "number" ? v : undefined;
}

/** The backend as etcd's buckets, read through `db` (a connection inside a read transaction). */
export function etcdBackendContent(db: Database): EtcdBackendContent {
  const members: EtcdMember[] = db
    .prepare<[], { id: string; value: Buffer }>("SELECT CAST(id AS TEXT) AS id, value FROM members ORDER BY id")
    .all()
    .map((row) => {
      const m = decodeMember(idFromSqlite(row.id), row.value);
      return { id: m.id, name: m.name, peerURLs: m.peerUrls, clientURLs: m.clientUrls, isLearner: m.isLearner };
    });
  const removedMemberIds = db
    .prepare<[], string>("SELECT CAST(id AS TEXT) FROM members_removed ORDER BY id")
    .pluck()
    .all()
    .map(idFromSqlite);
  const alarms: EtcdAlarm[] = db
    .prepare<[], { member_id: string; alarm: number }>("SELECT CAST(member_id AS TEXT) AS member_id, alarm FROM alarms")
    .all()
    .map((a) => ({ memberId: idFromSqlite(a.member_id), alarm: a.alarm }));
  const scheduledCompactRevision = metaRevision(db, META_SCHEDULED_COMPACT);
  const finishedCompactRevision = metaRevision(db, META_FINISHED_COMPACT);
  return {
    revisions: revisions(db),
    leases: leases(db),
    consistentIndex: BigInt(metaRevision(db, META_CONSISTENT_INDEX) ?? 0),
    ...(scheduledCompactRevision !== undefined ? { scheduledCompactRevision } : {}),
    ...(finishedCompactRevision !== undefined ? { finishedCompactRevision } : {}),
    members,
    removedMemberIds,
    clusterVersion: CLUSTER_VERSION,
    alarms,
    auth: authState(db),
  };
}

/**
 * Streams the backend's committed state as etcd's snapshot (the bbolt file, then its SHA-256)
 * through `send`, whose promise is the stream's backpressure. The event loop gets a turn after
 * every chunk: a send into a socket with room resolves at once, and the stream hands on its queued
 * pages (up to 1 MiB) in one go, which would otherwise hold the loop for the whole drain.
 */
export function streamBackendSnapshot(backend: Backend, send: (chunk: SnapshotChunk) => Promise<void> | void): Promise<SnapshotStreamResult> {
  return backend.withReadTransaction((db) =>
    streamEtcdSnapshot(
      () => etcdBackendContent(db),
      async (chunk) => {
        await send(chunk);
        await new Promise<void>((resolve) => setImmediate(resolve));
      },
      { yieldEvery: YIELD_EVERY },
    ),
  );
}
