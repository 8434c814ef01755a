/**
 * Reads etcd 3.4's backend (a member's `db`, or a snapshot file with its SHA-256 trailer) into
 * plain records. The trailer is verified before any bucket is read; every value that does not
 * decode is refused with the file, page and offset where it lies.
 */

import { BoltFormatError, BoltReader, FilePageSource, type BoltBucket, type BoltEntry } from "../bbolt/index.js";
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
  MEMBERS_BUCKET,
  MEMBERS_REMOVED_BUCKET,
  META_BUCKET,
  SCHEDULED_COMPACT_KEY,
} from "./buckets.js";
import type { EtcdAuthState, EtcdBackendContent } from "./backend_writer.js";
import {
  decodeAlarm,
  decodeKeyValue,
  decodeLease,
  decodeMember,
  decodeRole,
  decodeUser,
  type EtcdAlarm,
  type EtcdLease,
  type EtcdMember,
  type EtcdRevisionRecord,
} from "./records.js";
import { decodeRevisionKey } from "./revision_key.js";
import { verifySnapshotHash } from "./snapshot_hash.js";
import { refuseSqliteSnapshot } from "./sqlite_snapshot.js";

export interface EtcdBackendOpenOptions {
  /** Refuse a file without etcd's SHA-256 trailer (a snapshot must have one; a member's db has none). */
  requireSnapshotHash?: boolean;
}

export class EtcdBackendReader {
  readonly path: string;
  readonly bolt: BoltReader;
  /** True when the file carried etcd's SHA-256 trailer and it matched. */
  readonly hashVerified: boolean;

  private constructor(path: string, bolt: BoltReader, hashVerified: boolean) {
    this.path = path;
    this.bolt = bolt;
    this.hashVerified = hashVerified;
  }

  static open(path: string, options: EtcdBackendOpenOptions = {}): EtcdBackendReader {
    // An etcetera snapshot of the SQLite days is named as such, not reported as a bad bbolt meta page.
    refuseSqliteSnapshot(path);
    const { dbBytes, hashed } = verifySnapshotHash(path, { required: options.requireSnapshotHash ?? false });
    const source = FilePageSource.open(path, dbBytes);
    try {
      return new EtcdBackendReader(path, BoltReader.fromSource(source), hashed);
    } catch (err) {
      source.close();
      throw err;
    }
  }

  close(): void {
    this.bolt.close();
  }

  private refuse(e: BoltEntry, bucket: string, reason: string): BoltFormatError {
    return new BoltFormatError(this.path, e.pgid, e.valueOffset, `bucket ${bucket}, key 0x${Buffer.from(e.key).toString("hex")}: ${reason}`);
  }

  private decode<T>(e: BoltEntry, bucket: string, what: string, fn: (v: Uint8Array) => T): T {
    if (e.isBucket) throw this.refuse(e, bucket, `a nested bucket where etcd stores a ${what}`);
    try {
      return fn(e.value);
    } catch (err) {
      if (err instanceof BoltFormatError) throw err;
      throw this.refuse(e, bucket, `bad ${what}: ${(err as Error).message}`);
    }
  }

  private bucket(name: string): BoltBucket | undefined {
    return this.bolt.bucket(name);
  }

  private *entriesOf(name: string): Generator<BoltEntry> {
    const b = this.bucket(name);
    if (b) yield* this.bolt.entries(b);
  }

  /** The names of the top-level buckets present. */
  bucketNames(): string[] {
    const names: string[] = [];
    for (const e of this.bolt.entries(this.bolt.rootBucket())) if (e.isBucket) names.push(Buffer.from(e.key).toString());
    return names;
  }

  /** The key bucket in revision order (oldest first), one record at a time. */
  *revisions(): Generator<EtcdRevisionRecord> {
    for (const e of this.entriesOf(KEY_BUCKET)) {
      const rev = decodeRevisionKey(e.key);
      if (typeof rev === "string") throw this.refuse(e, KEY_BUCKET, rev);
      const kv = this.decode(e, KEY_BUCKET, "mvccpb.KeyValue", decodeKeyValue);
      if (kv.key.length === 0) throw this.refuse(e, KEY_BUCKET, "KeyValue with an empty key");
      if (!rev.tombstone && kv.modRevision !== rev.main) {
        throw this.refuse(e, KEY_BUCKET, `KeyValue.mod_revision ${kv.modRevision} differs from its revision key ${rev.main}`);
      }
      yield { main: rev.main, sub: rev.sub, tombstone: rev.tombstone, kv };
    }
  }

  *leases(): Generator<EtcdLease> {
    for (const e of this.entriesOf(LEASE_BUCKET)) {
      const lease = this.decode(e, LEASE_BUCKET, "leasepb.Lease", decodeLease);
      if (e.key.length !== 8 || Buffer.from(e.key).readBigInt64BE(0) !== lease.id) {
        throw this.refuse(e, LEASE_BUCKET, `lease ${lease.id} stored under a key that is not its 8-byte id`);
      }
      yield lease;
    }
  }

  members(): EtcdMember[] {
    return [...this.entriesOf(MEMBERS_BUCKET)].map((e) => this.decode(e, MEMBERS_BUCKET, "member JSON", decodeMember));
  }

  removedMemberIds(): bigint[] {
    return [...this.entriesOf(MEMBERS_REMOVED_BUCKET)].map((e) => {
      const hex = Buffer.from(e.key).toString();
      if (!/^[0-9a-f]{1,16}$/.test(hex)) throw this.refuse(e, MEMBERS_REMOVED_BUCKET, `key ${JSON.stringify(hex)} is not a hex member id`);
      return BigInt("0x" + hex);
    });
  }

  alarms(): EtcdAlarm[] {
    return [...this.entriesOf(ALARM_BUCKET)].map((e) => {
      try {
        return decodeAlarm(e.key);
      } catch (err) {
        throw this.refuse(e, ALARM_BUCKET, `bad AlarmMember key: ${(err as Error).message}`);
      }
    });
  }

  private metaValue(bucket: string, key: string, bytes: number | undefined): Uint8Array | undefined {
    const b = this.bucket(bucket);
    if (!b) return undefined;
    const e = this.bolt.getEntry(b, Buffer.from(key));
    if (!e) return undefined;
    if (e.isBucket || (bytes !== undefined && e.value.length !== bytes)) {
      throw this.refuse(e, bucket, `${key} is ${e.isBucket ? "a bucket" : `${e.value.length} bytes`}, want ${bytes} bytes`);
    }
    return e.value;
  }

  /** meta/consistent_index (0n when absent, as etcd reads it). */
  consistentIndex(): bigint {
    const v = this.metaValue(META_BUCKET, CONSISTENT_INDEX_KEY, 8);
    return v ? Buffer.from(v).readBigUInt64BE(0) : 0n;
  }

  /** meta's compaction revisions (undefined when never compacted). */
  compactRevisions(): { scheduled: number | undefined; finished: number | undefined } {
    const rev = (key: string): number | undefined => {
      const v = this.metaValue(META_BUCKET, key, 17);
      if (!v) return undefined;
      const r = decodeRevisionKey(v);
      if (typeof r === "string") throw new BoltFormatError(this.path, undefined, 0, `meta/${key}: ${r}`);
      return r.main;
    };
    return { scheduled: rev(SCHEDULED_COMPACT_KEY), finished: rev(FINISHED_COMPACT_KEY) };
  }

  clusterVersion(): string | undefined {
    const v = this.metaValue(CLUSTER_BUCKET, CLUSTER_VERSION_KEY, undefined);
    return v ? Buffer.from(v).toString() : undefined;
  }

  /** Auth state; undefined when the auth bucket was never created. */
  auth(): EtcdAuthState | undefined {
    if (!this.bucket(AUTH_BUCKET)) return undefined;
    const enabled = this.metaValue(AUTH_BUCKET, AUTH_ENABLED_KEY, 1);
    const revision = this.metaValue(AUTH_BUCKET, AUTH_REVISION_KEY, 8);
    return {
      enabled: enabled === undefined ? undefined : enabled[0] === 1,
      revision: revision ? Buffer.from(revision).readBigUInt64BE(0) : 0n,
      users: [...this.entriesOf(AUTH_USERS_BUCKET)].map((e) => this.decode(e, AUTH_USERS_BUCKET, "authpb.User", decodeUser)),
      roles: [...this.entriesOf(AUTH_ROLES_BUCKET)].map((e) => this.decode(e, AUTH_ROLES_BUCKET, "authpb.Role", decodeRole)),
    };
  }

  /**
   * Everything in the backend as writer input (revisions and leases stay lazy and can be iterated
   * again, so the content also feeds the two-pass snapshot stream while this reader is open).
   */
  content(): EtcdBackendContent {
    const compact = this.compactRevisions();
    return {
      revisions: { [Symbol.iterator]: () => this.revisions() },
      leases: { [Symbol.iterator]: () => this.leases() },
      consistentIndex: this.consistentIndex(),
      scheduledCompactRevision: compact.scheduled,
      finishedCompactRevision: compact.finished,
      members: this.members(),
      removedMemberIds: this.removedMemberIds(),
      clusterVersion: this.clusterVersion(),
      alarms: this.alarms(),
      auth: this.auth(),
    };
  }
}
