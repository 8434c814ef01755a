/**
 * Members and their ids, derived as etcd derives them (membership.NewMember / RaftCluster.genID):
 *
 *   member id  = first 8 bytes of sha1(sorted peer URLs joined with "" + cluster token [+ unix seconds])
 *   cluster id = first 8 bytes of sha1(the sorted member ids as 8-byte big-endian words)
 *
 * etcd uses the full 64 bits. etcetera keeps only the low 52 bits of each (the first three hex
 * digits become 0) so that every id is an exact JavaScript number (< 2^52 ≤ MAX_SAFE_INTEGER) and
 * still a valid uint64 on the wire. The low 13 hex digits are the same as etcd's: the member etcd
 * calls 8e9e05c52164694d is 000e05c52164694d here (`formatId` always prints 16 digits).
 * Ids are deterministic: the same URLs and token give the same ids on every member and restart.
 */
import { createHash } from "node:crypto";
import type { NodeId } from "../raft/types.js";
import type { InitialMember, ServerConfig } from "./config.js";

/** Ids are kept below 2^52. */
export const ID_BITS = 52;
const ID_MASK_HIGH = 2 ** (ID_BITS - 32) - 1; // mask of the high 32-bit word

/** etcd's membership.Member, as the Cluster API reports it. */
export interface Member {
  readonly id: NodeId;
  /** Empty until a member added at runtime has started and published its name. */
  readonly name: string;
  readonly peerUrls: readonly string[];
  readonly clientUrls: readonly string[];
  readonly isLearner: boolean;
}

/** The bootstrap view of the cluster built from --initial-cluster. */
export interface InitialClusterInfo {
  readonly clusterId: number;
  /** In --initial-cluster order. */
  readonly members: readonly Member[];
  /** This member (the one named by --name). */
  readonly local: Member;
}

/** The low 52 bits of the first 8 bytes of `digest`, never 0 (0 is raft's NONE). */
function idFromDigest(digest: Buffer): number {
  const high = digest.readUInt32BE(0) & ID_MASK_HIGH;
  const low = digest.readUInt32BE(4);
  const id = high * 2 ** 32 + low;
  // A zero id has probability 2^-52; mapping it to 1 keeps the function total and deterministic.
  return id === 0 ? 1 : id;
}

/**
 * The member id for a member with these peer URLs in the cluster with this token. `nowSeconds`
 * is given only for members added at runtime (etcd adds the time so a re-added member gets a new
 * id); bootstrap members use none, so every member computes the same ids.
 */
export function computeMemberId(peerUrls: readonly string[], clusterToken: string, nowSeconds?: number): NodeId {
  if (peerUrls.length === 0) throw new Error("a member needs at least one peer URL");
  const hash = createHash("sha1");
  hash.update([...peerUrls].sort().join(""));
  hash.update(clusterToken);
  if (nowSeconds !== undefined) {
    if (!Number.isSafeInteger(nowSeconds) || nowSeconds < 0) throw new Error(`invalid time ${nowSeconds}`);
    const time = Buffer.alloc(8);
    time.writeBigUInt64BE(BigInt(nowSeconds));
    hash.update(time);
  }
  return idFromDigest(hash.digest());
}

/** The cluster id of a cluster with these members (order does not matter). */
export function computeClusterId(memberIds: readonly NodeId[]): number {
  if (memberIds.length === 0) throw new Error("a cluster needs at least one member");
  const sorted = [...memberIds].sort((a, b) => a - b);
  const words = Buffer.alloc(8 * sorted.length);
  sorted.forEach((id, i) => writeId(words, 8 * i, id));
  return idFromDigest(createHash("sha1").update(words).digest());
}

/** Writes an id as a big-endian uint64. */
export function writeId(buf: Buffer, offset: number, id: number): void {
  assertId(id);
  buf.writeUInt32BE(Math.floor(id / 2 ** 32), offset);
  buf.writeUInt32BE(id >>> 0, offset + 4);
}

export function assertId(id: number): void {
  if (!Number.isSafeInteger(id) || id < 0 || id >= 2 ** ID_BITS) throw new Error(`invalid member id ${id}`);
}

/** etcd's types.ID.String(): 16 lower-case hex digits ("000e05c52164694d"). */
export function formatId(id: number): string {
  assertId(id);
  return id.toString(16).padStart(16, "0");
}

/** Parses a hex member id as etcdctl prints it (with or without leading zeros). */
export function parseId(hex: string): NodeId {
  if (!/^[0-9a-fA-F]{1,16}$/.test(hex)) throw new Error(`invalid member id "${hex}"`);
  const id = parseInt(hex, 16);
  if (!Number.isSafeInteger(id) || id >= 2 ** ID_BITS) {
    throw new Error(`member id ${hex} is out of range: etcetera ids are below 2^${ID_BITS}`);
  }
  return id;
}

/** Members and cluster id for bootstrapping from --initial-cluster and --initial-cluster-token. */
export function initialClusterInfo(config: Pick<ServerConfig, "name" | "initialCluster" | "initialClusterToken" | "advertiseClientUrls">): InitialClusterInfo {
  const members = config.initialCluster.map((m: InitialMember): Member => ({
    id: computeMemberId(m.peerUrls, config.initialClusterToken),
    name: m.name,
    peerUrls: m.peerUrls,
    clientUrls: m.name === config.name ? config.advertiseClientUrls : [],
    isLearner: false,
  }));
  const ids = new Set(members.map((m) => m.id));
  if (ids.size !== members.length) throw new Error("two members of the initial cluster have the same id (same peer URLs)");
  const local = members.find((m) => m.name === config.name);
  if (local === undefined) throw new Error(`couldn't find local name "${config.name}" in the initial cluster configuration`);
  return { clusterId: computeClusterId(members.map((m) => m.id)), members, local };
}
