/**
 * Members and their ids, derived as etcd 3.4 derives them (membership.NewMember / RaftCluster.genID):
 *
 *   member id  = first 8 bytes, big-endian, of sha1(sorted peer URLs joined with "" + cluster token [+ unix seconds])
 *   cluster id = first 8 bytes, big-endian, of sha1(the sorted member ids as 8-byte big-endian words)
 *
 * All 64 bits, as bigints (the raft core's NodeId): the same --initial-cluster and
 * --initial-cluster-token give the same ids as etcd (8e9e05c52164694d), printed as 16 hex digits.
 * Data dirs written before ids were exact hold ids below 2^52 (the low 52 bits of etcd's); they
 * are read back as they were written (the WAL's metadata names the member), so they still start.
 * Ids are deterministic: the same URLs and token give the same ids on every member and restart.
 */
import { createHash } from "node:crypto";
import { compareNodeIds, type NodeId } from "../raft/types.js";
import type { InitialMember, ServerConfig } from "./config.js";

const UINT64_MAX = 2n ** 64n - 1n;

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
  readonly clusterId: NodeId;
  /** In --initial-cluster order. */
  readonly members: readonly Member[];
  /** This member (the one named by --name). */
  readonly local: Member;
}

/** The first 8 bytes of `digest` as a big-endian uint64, as etcd's binary.BigEndian.Uint64. */
function idFromDigest(digest: Buffer): NodeId {
  return digest.readBigUInt64BE(0);
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
    // etcd appends fmt.Sprintf("%d", now.Unix()): the decimal text, not the binary word.
    hash.update(String(nowSeconds));
  }
  return idFromDigest(hash.digest());
}

/** The cluster id of a cluster with these members (order does not matter). */
export function computeClusterId(memberIds: readonly NodeId[]): NodeId {
  if (memberIds.length === 0) throw new Error("a cluster needs at least one member");
  const sorted = [...memberIds].sort(compareNodeIds);
  const words = Buffer.alloc(8 * sorted.length);
  sorted.forEach((id, i) => writeId(words, 8 * i, id));
  return idFromDigest(createHash("sha1").update(words).digest());
}

/** Writes an id as a big-endian uint64. */
export function writeId(buf: Buffer, offset: number, id: NodeId): void {
  assertId(id);
  buf.writeBigUInt64BE(id, offset);
}

/** An id is a uint64 (0 is raft's NONE: valid on the wire, never a member). */
export function assertId(id: NodeId): void {
  if (typeof id !== "bigint" || id < 0n || id > UINT64_MAX) throw new Error(`invalid member id ${String(id)}`);
}

/** etcd's types.ID.String(): 16 lower-case hex digits ("8e9e05c52164694d"), in logs, metrics labels and errors. */
export function formatId(id: NodeId): string {
  assertId(id);
  return id.toString(16).padStart(16, "0");
}

/** Parses a hex member id as etcdctl prints it (with or without leading zeros). */
export function parseId(hex: string): NodeId {
  if (!/^[0-9a-fA-F]{1,16}$/.test(hex)) throw new Error(`invalid member id "${hex}"`);
  return BigInt("0x" + hex);
}

/**
 * An id as SQLite stores it: a signed 64-bit INTEGER holding the uint64's bits (ids of 2^63 and
 * above are negative there). Rows written before ids were exact hold the same value as ever.
 */
export function idToSqlite(id: NodeId): bigint {
  assertId(id);
  return BigInt.asIntN(64, id);
}

/** The id of a row read with `CAST(id AS TEXT)` (exact: a JavaScript number would round it). */
export function idFromSqlite(text: string): NodeId {
  return BigInt.asUintN(64, BigInt(text));
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
