/**
 * etcd 3.4's backend (bbolt `db`) written as etcetera's backend (one SQLite file with the stores'
 * own tables): every revision of the key bucket with its create revision and version, the
 * compaction revisions, leases (TTL and checkpointed remaining TTL: etcetera's lessor restarts them
 * as etcd 3.4's does, at the remaining TTL when checkpointed, else the full TTL), alarms, auth
 * (enabled, revision, users and roles as the authpb bytes both keep), the membership and the
 * consistent index with its term. The file is written in one transaction, then fsynced.
 */
import { closeSync, fsyncSync, openSync } from "node:fs";
import Database from "better-sqlite3";
import { AUTH_SCHEMA } from "../../auth/store.js";
import { LEASE_SCHEMA } from "../../lease/lease_store.js";
import { KV_SCHEMA } from "../../mvcc/kv_backend.js";
import { META_CONSISTENT_INDEX, META_TERM } from "../../mvcc/kvstore.js";
import { META_FINISHED_COMPACT, META_SCHEDULED_COMPACT } from "../../mvcc/kvstore_compaction.js";
import { packRev } from "../../mvcc/revision.js";
import { ALARMS_SCHEMA } from "../../server/alarms.js";
import { idToSqlite, type Member } from "../../server/member.js";
import { encodeMember, MEMBERSHIP_SCHEMA } from "../../server/membership.js";
import type { EtcdBackendReader } from "../backend_reader.js";
import { encodeRole, encodeUser } from "../records.js";
import { ImportRefusedError, importLeaseId, importNodeId } from "./ids.js";

/**
 * What an imported backend holds besides etcd's own buckets: the membership and the raft position
 * it is at. An import of etcd's data dir and `snapshot restore` take these from different places
 * (etcd's WAL and backend, or the restore's flags) and pass them through writeMemberDir to here.
 */
export interface BackendContent {
  readonly source: EtcdBackendReader;
  readonly members: readonly Member[];
  readonly removedMemberIds: readonly bigint[];
  readonly consistentIndex: number;
  /** The term of the entry at the consistent index. */
  readonly term: number;
  /** Told every `progressEvery` revisions (100,000 unless the import names another). */
  readonly progress?: (revisions: number) => void;
}

export interface BackendImportOptions extends BackendContent {
  /** The SQLite file to create (must not exist). */
  readonly path: string;
  readonly progressEvery?: number;
}

export interface BackendImportResult {
  readonly revisions: number;
  readonly currentRevision: number;
  readonly compactRevision: number | undefined;
  readonly leases: number;
  readonly users: number;
  readonly roles: number;
  readonly authEnabled: boolean;
}

export function importBackend(o: BackendImportOptions): BackendImportResult {
  const db = new Database(o.path);
  try {
    db.pragma("journal_mode = DELETE");
    db.exec([KV_SCHEMA, LEASE_SCHEMA, MEMBERSHIP_SCHEMA, ALARMS_SCHEMA, AUTH_SCHEMA].join(";\n"));
    const result = db.transaction(() => writeTables(db, o))();
    db.close();
    const fd = openSync(o.path, "r+");
    try {
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    return result;
  } catch (err) {
    if (db.open) db.close();
    throw err;
  }
}

function writeTables(db: Database.Database, o: BackendImportOptions): BackendImportResult {
  const src = o.source;
  const putKv = db.prepare("INSERT INTO kv (rev, key, value, create_rev, version, lease, tombstone) VALUES (?, ?, ?, ?, ?, ?, ?)");
  const every = o.progressEvery ?? 100_000;
  let revisions = 0;
  let currentRevision = 1;
  for (const r of src.revisions()) {
    if (r.main > currentRevision) currentRevision = r.main;
    const kv = r.kv;
    const lease = r.tombstone ? 0 : importLeaseId(kv.lease, `key ${Buffer.from(kv.key).toString()} at revision ${r.main}: lease`);
    putKv.run(packRev(r.main, r.sub), Buffer.from(kv.key), Buffer.from(kv.value), r.tombstone ? 0 : kv.createRevision, r.tombstone ? 0 : kv.version, lease, r.tombstone ? 1 : 0);
    if (++revisions % every === 0) o.progress?.(revisions);
  }
  const meta = db.prepare("INSERT OR REPLACE INTO meta (name, value) VALUES (?, ?)");
  meta.run(META_CONSISTENT_INDEX, o.consistentIndex);
  meta.run(META_TERM, o.term);
  const compact = src.compactRevisions();
  if (compact.finished !== undefined) meta.run(META_FINISHED_COMPACT, compact.finished);
  if (compact.scheduled !== undefined) meta.run(META_SCHEDULED_COMPACT, compact.scheduled);
  if (compact.finished !== undefined && compact.finished > currentRevision) currentRevision = compact.finished;

  const putLease = db.prepare("INSERT INTO lease (id, ttl, remaining_ttl) VALUES (?, ?, ?)");
  let leases = 0;
  for (const l of src.leases()) {
    putLease.run(importLeaseId(l.id, "lease"), l.ttl, l.remainingTtl);
    leases++;
  }

  const putMember = db.prepare("INSERT INTO members (id, value) VALUES (?, ?)");
  for (const m of o.members) putMember.run(idToSqlite(m.id), encodeMember(m));
  const putRemoved = db.prepare("INSERT OR IGNORE INTO members_removed (id) VALUES (?)");
  for (const id of o.removedMemberIds) putRemoved.run(idToSqlite(importNodeId(id, "removed member id")));

  const putAlarm = db.prepare("INSERT OR IGNORE INTO alarms (member_id, alarm) VALUES (?, ?)");
  for (const a of src.alarms()) putAlarm.run(idToSqlite(importNodeId(a.memberId, "alarm member id")), a.alarm);

  const auth = src.auth();
  const putAuth = db.prepare("INSERT OR REPLACE INTO auth (key, value) VALUES (?, ?)");
  const putUser = db.prepare("INSERT INTO auth_users (name, user) VALUES (?, ?)");
  const putRole = db.prepare("INSERT INTO auth_roles (name, role) VALUES (?, ?)");
  if (auth !== undefined) {
    if (auth.revision > BigInt(Number.MAX_SAFE_INTEGER)) throw new ImportRefusedError(`auth revision ${auth.revision} above 2^53`);
    putAuth.run("revision", Number(auth.revision));
    putAuth.run("enabled", auth.enabled === true ? 1 : 0);
    for (const u of auth.users) putUser.run(Buffer.from(u.name), encodeUser(u));
    for (const r of auth.roles) putRole.run(Buffer.from(r.name), encodeRole(r));
  }
  return {
    revisions,
    currentRevision,
    compactRevision: compact.finished,
    leases,
    users: auth?.users.length ?? 0,
    roles: auth?.roles.length ?? 0,
    authEnabled: auth?.enabled === true,
  };
}
