/**
 * The buckets of etcd 3.4's backend (mvcc/backend over bbolt) and the fixed keys inside them,
 * as etcd names them (mvcc/kvstore.go, lease/lessor.go, etcdserver/api/membership/store.go,
 * etcdserver/cindex, auth/store.go, etcdserver/api/v3alarm).
 */

export const KEY_BUCKET = "key";
export const META_BUCKET = "meta";
export const LEASE_BUCKET = "lease";
export const MEMBERS_BUCKET = "members";
export const MEMBERS_REMOVED_BUCKET = "members_removed";
export const CLUSTER_BUCKET = "cluster";
export const ALARM_BUCKET = "alarm";
export const AUTH_BUCKET = "auth";
export const AUTH_USERS_BUCKET = "authUsers";
export const AUTH_ROLES_BUCKET = "authRoles";

/** Every bucket in bbolt's (byte) order, the order the writer emits them in. */
export const ETCD_BUCKETS_IN_ORDER: readonly string[] = [
  ALARM_BUCKET,
  AUTH_BUCKET,
  AUTH_ROLES_BUCKET,
  AUTH_USERS_BUCKET,
  CLUSTER_BUCKET,
  KEY_BUCKET,
  LEASE_BUCKET,
  MEMBERS_BUCKET,
  MEMBERS_REMOVED_BUCKET,
  META_BUCKET,
];

/** meta: the raft index of the last applied entry, 8-byte big-endian. */
export const CONSISTENT_INDEX_KEY = "consistent_index";
/** meta: compaction revisions, each a 17-byte revision key with sub 0. */
export const SCHEDULED_COMPACT_KEY = "scheduledCompactRev";
export const FINISHED_COMPACT_KEY = "finishedCompactRev";
/** cluster: the cluster version string ("3.4.0"). */
export const CLUSTER_VERSION_KEY = "clusterVersion";
/** auth: one byte, 1 when enabled; and the auth revision, 8-byte big-endian. */
export const AUTH_ENABLED_KEY = "authEnabled";
export const AUTH_REVISION_KEY = "authRevision";
/** members_removed: the value stored for every removed member id. */
export const MEMBER_REMOVED_VALUE = "removed";
