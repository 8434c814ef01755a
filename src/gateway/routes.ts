/**
 * The gateway's paths as etcd 3.4 serves them (the google.api.http options of its protos, all
 * POST with the whole message as body): path → gRPC method. Where 3.4 registers one path twice
 * (HashKV on /v3/maintenance/hash), grpc-gateway serves the first, so HashKV has no path, as
 * in 3.4; etcd 3.5's additions (/v3/auth/status, /v3/maintenance/downgrade, hashkv) are not
 * served, since 3.4 answers them 404.
 */

const KV = "etcdserverpb.KV";
const WATCH = "etcdserverpb.Watch";
const LEASE = "etcdserverpb.Lease";
const CLUSTER = "etcdserverpb.Cluster";
const MAINTENANCE = "etcdserverpb.Maintenance";
const AUTH = "etcdserverpb.Auth";
const LOCK = "v3lockpb.Lock";
const ELECTION = "v3electionpb.Election";

/** [path, service, method] */
const TABLE: ReadonlyArray<readonly [string, string, string]> = [
  ["/v3/kv/range", KV, "Range"],
  ["/v3/kv/put", KV, "Put"],
  ["/v3/kv/deleterange", KV, "DeleteRange"],
  ["/v3/kv/txn", KV, "Txn"],
  ["/v3/kv/compaction", KV, "Compact"],
  ["/v3/watch", WATCH, "Watch"],
  ["/v3/lease/grant", LEASE, "LeaseGrant"],
  ["/v3/lease/revoke", LEASE, "LeaseRevoke"],
  ["/v3/kv/lease/revoke", LEASE, "LeaseRevoke"],
  ["/v3/lease/keepalive", LEASE, "LeaseKeepAlive"],
  ["/v3/lease/timetolive", LEASE, "LeaseTimeToLive"],
  ["/v3/kv/lease/timetolive", LEASE, "LeaseTimeToLive"],
  ["/v3/lease/leases", LEASE, "LeaseLeases"],
  ["/v3/kv/lease/leases", LEASE, "LeaseLeases"],
  ["/v3/cluster/member/add", CLUSTER, "MemberAdd"],
  ["/v3/cluster/member/remove", CLUSTER, "MemberRemove"],
  ["/v3/cluster/member/update", CLUSTER, "MemberUpdate"],
  ["/v3/cluster/member/list", CLUSTER, "MemberList"],
  ["/v3/cluster/member/promote", CLUSTER, "MemberPromote"],
  ["/v3/maintenance/alarm", MAINTENANCE, "Alarm"],
  ["/v3/maintenance/status", MAINTENANCE, "Status"],
  ["/v3/maintenance/defragment", MAINTENANCE, "Defragment"],
  ["/v3/maintenance/hash", MAINTENANCE, "Hash"],
  ["/v3/maintenance/snapshot", MAINTENANCE, "Snapshot"],
  ["/v3/maintenance/transfer-leadership", MAINTENANCE, "MoveLeader"],
  ["/v3/auth/enable", AUTH, "AuthEnable"],
  ["/v3/auth/disable", AUTH, "AuthDisable"],
  ["/v3/auth/authenticate", AUTH, "Authenticate"],
  ["/v3/auth/user/add", AUTH, "UserAdd"],
  ["/v3/auth/user/get", AUTH, "UserGet"],
  ["/v3/auth/user/list", AUTH, "UserList"],
  ["/v3/auth/user/delete", AUTH, "UserDelete"],
  ["/v3/auth/user/changepw", AUTH, "UserChangePassword"],
  ["/v3/auth/user/grant", AUTH, "UserGrantRole"],
  ["/v3/auth/user/revoke", AUTH, "UserRevokeRole"],
  ["/v3/auth/role/add", AUTH, "RoleAdd"],
  ["/v3/auth/role/get", AUTH, "RoleGet"],
  ["/v3/auth/role/list", AUTH, "RoleList"],
  ["/v3/auth/role/delete", AUTH, "RoleDelete"],
  ["/v3/auth/role/grant", AUTH, "RoleGrantPermission"],
  ["/v3/auth/role/revoke", AUTH, "RoleRevokePermission"],
  ["/v3/lock/lock", LOCK, "Lock"],
  ["/v3/lock/unlock", LOCK, "Unlock"],
  ["/v3/election/campaign", ELECTION, "Campaign"],
  ["/v3/election/proclaim", ELECTION, "Proclaim"],
  ["/v3/election/leader", ELECTION, "Leader"],
  ["/v3/election/observe", ELECTION, "Observe"],
  ["/v3/election/resign", ELECTION, "Resign"],
];

/** The gRPC method path ("/etcdserverpb.KV/Range") a gateway path calls, if it is one. */
const ROUTES: ReadonlyMap<string, string> = new Map(TABLE.map(([path, service, method]) => [path, `/${service}/${method}`]));

export function gatewayRoute(path: string): string | undefined {
  return ROUTES.get(path);
}

/** Every gateway path (tests and the README walk them). */
export function gatewayPaths(): string[] {
  return [...ROUTES.keys()];
}
