/**
 * The 64-bit fields that hold ids, decoded as exact bigints instead of numbers.
 *
 * A number is exact only below 2^53, which is enough for revisions, indexes, sizes and counts but
 * not for etcd's ids: member and cluster ids are sha1-derived uint64s that use all 64 bits
 * (8e9e05c52164694d), so they are held as bigints everywhere (the raft core's NodeId). The codecs
 * and the generated types (typegen.ts) read this list, so a field listed here is `bigint` in
 * member-types.ts and etcd-types.ts and goes through ProtoReader.uint64Big/int64Big.
 *
 * Keyed by message and field number (the member codecs rename fields to camelCase).
 */

/** "package.Message" → field numbers of its id fields. */
const ID64: ReadonlyMap<string, readonly number[]> = new Map([
  ["etcdserverpb.ResponseHeader", [1, 2]], // cluster_id, member_id
  ["etcdserverpb.Member", [1]], // ID
  ["etcdserverpb.MemberRemoveRequest", [1]], // ID
  ["etcdserverpb.MemberUpdateRequest", [1]], // ID
  ["etcdserverpb.MemberPromoteRequest", [1]], // ID
  ["etcdserverpb.MoveLeaderRequest", [1]], // targetID
  ["etcdserverpb.AlarmRequest", [2]], // memberID
  ["etcdserverpb.AlarmMember", [1]], // memberID
  ["etcdserverpb.StatusResponse", [4]], // leader
  ["etcdserverpb.MemberAttributes", [1]], // member_ID
]);

/**
 * The int64 lease and watch id fields, decoded exactly in ProtoReader.int64Exact's representation:
 * a number while the id is a safe integer, a bigint beyond (`number | bigint` in the generated
 * types). Unlike member ids, a lease id rides on hot paths (every Put, every KeyValue of a range or
 * watch response) and the ids clients choose are small, so the common case stays a number; etcd's
 * server-chosen lease ids (idutil: member bits << 48 | clock << 8 | counter) need the bigint.
 * Watch ids are the stream's (0, 1, 2, ...) unless the client chooses one (etcd 3.4's
 * WatchCreateRequest.watch_id): any int64, answered back unchanged in every response of the watcher.
 */
const EXACT_INT64: ReadonlyMap<string, readonly number[]> = new Map([
  ["mvccpb.KeyValue", [6]], // lease
  ["etcdserverpb.PutRequest", [3]], // lease
  ["etcdserverpb.Compare", [8]], // lease (target_union)
  ["etcdserverpb.LeaseGrantRequest", [2]], // ID
  ["etcdserverpb.LeaseGrantResponse", [2]], // ID
  ["etcdserverpb.LeaseRevokeRequest", [1]], // ID
  ["etcdserverpb.LeaseCheckpoint", [1]], // ID
  ["etcdserverpb.LeaseKeepAliveRequest", [1]], // ID
  ["etcdserverpb.LeaseKeepAliveResponse", [2]], // ID
  ["etcdserverpb.LeaseTimeToLiveRequest", [1]], // ID
  ["etcdserverpb.LeaseTimeToLiveResponse", [2]], // ID
  ["etcdserverpb.LeaseStatus", [1]], // ID
  ["v3lockpb.LockRequest", [2]], // lease
  ["v3electionpb.CampaignRequest", [2]], // lease
  ["v3electionpb.LeaderKey", [4]], // lease
  ["etcdserverpb.WatchCreateRequest", [7]], // watch_id
  ["etcdserverpb.WatchCancelRequest", [1]], // watch_id
  ["etcdserverpb.WatchResponse", [2]], // watch_id
]);

/** True if field number `fieldId` of message `typeName` is an int64 lease or watch id (EXACT_INT64). */
export function isExactInt64Field(typeName: string, fieldId: number): boolean {
  return EXACT_INT64.get(typeName)?.includes(fieldId) ?? false;
}

/** True if field number `fieldId` of message `typeName` ("etcdserverpb.Member", no leading dot) is an id. */
export function isId64Field(typeName: string, fieldId: number): boolean {
  return ID64.get(typeName)?.includes(fieldId) ?? false;
}
