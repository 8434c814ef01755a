/**
 * Reads etcd 3.4's `.snap` files (member/snap/%016x-%016x.snap, term-index): snappb.Snapshot{crc,
 * data} where crc is the CRC-32C of data and data is a raftpb.Snapshot whose own data is the v2
 * store as JSON (etcd 3.4 keeps the membership there: /0/members/<hex id>/raftAttributes and
 * attributes, /0/members_removed, /0/version). The backend itself is member/snap/db.
 */
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { crc32c } from "../mvcc/crc32c.js";
import { EtcdFileError } from "./file_error.js";
import { asSafeNumber, expectBytes, expectVarint, ProtoFieldError, protoFields } from "./proto_fields.js";
import { decodeEtcdRaftSnapshot, type EtcdRaftSnapshot } from "./raft_records.js";
import type { EtcdMember } from "./records.js";

const SNAP_NAME = /^([0-9a-f]{16})-([0-9a-f]{16})\.snap$/;

export interface EtcdSnapFile extends EtcdRaftSnapshot {
  readonly file: string;
}

/** The `.snap` file names in the directory, newest (highest term, then index) first. */
export function etcdSnapNames(snapDir: string): string[] {
  return readdirSync(snapDir)
    .filter((n) => SNAP_NAME.test(n))
    .sort()
    .reverse();
}

/** One `.snap` file, verified (crc, name against metadata). */
export function readEtcdSnapFile(file: string): EtcdSnapFile {
  const buf = readFileSync(file);
  if (buf.length === 0) throw new EtcdFileError(file, 0, "empty snapshot file");
  let crc: number | undefined;
  let data: Uint8Array | undefined;
  let dataOffset = 0;
  try {
    for (const f of protoFields(buf)) {
      if (f.field === 1) crc = asSafeNumber(expectVarint(f, "snappb.Snapshot.crc"), "crc");
      else if (f.field === 2) {
        data = expectBytes(f, "snappb.Snapshot.data");
        dataOffset = data.byteOffset - buf.byteOffset;
      }
    }
  } catch (err) {
    if (err instanceof ProtoFieldError) throw new EtcdFileError(file, 0, `snappb.Snapshot does not decode (truncated or corrupt): ${err.message}`);
    throw err;
  }
  if (data === undefined || crc === undefined) throw new EtcdFileError(file, 0, "snappb.Snapshot without crc or data");
  const actual = crc32c(data);
  if (actual !== crc) throw new EtcdFileError(file, dataOffset, `crc 0x${crc.toString(16)} does not match the data (0x${actual.toString(16)})`);
  let snap: EtcdRaftSnapshot;
  try {
    snap = decodeEtcdRaftSnapshot(data);
  } catch (err) {
    if (err instanceof ProtoFieldError) throw new EtcdFileError(file, dataOffset, `raftpb.Snapshot does not decode: ${err.message}`);
    throw err;
  }
  const m = SNAP_NAME.exec(file.slice(file.lastIndexOf("/") + 1));
  if (m && (BigInt("0x" + m[1]!) !== BigInt(snap.metadata.term) || BigInt("0x" + m[2]!) !== BigInt(snap.metadata.index))) {
    throw new EtcdFileError(file, dataOffset, `file name says term-index ${m[1]}-${m[2]}, metadata says ${snap.metadata.term}-${snap.metadata.index}`);
  }
  return { ...snap, file };
}

/** The newest `.snap` file (etcd's Snapshotter.Load), or undefined when there is none. A damaged newest file is refused, not skipped. */
export function readNewestEtcdSnap(snapDir: string): EtcdSnapFile | undefined {
  const names = etcdSnapNames(snapDir);
  return names.length === 0 ? undefined : readEtcdSnapFile(join(snapDir, names[0]!));
}

/** What etcd 3.4's v2 store holds about the cluster. */
export interface EtcdV2Cluster {
  readonly members: EtcdMember[];
  readonly removedMemberIds: bigint[];
  readonly clusterVersion: string | undefined;
}

interface V2Node {
  Value?: unknown;
  Children?: Record<string, V2Node>;
}

/** The membership in a `.snap` file's v2 store JSON. */
export function etcdV2Cluster(snap: EtcdSnapFile): EtcdV2Cluster {
  const fail = (reason: string): never => {
    throw new EtcdFileError(snap.file, 0, `v2 store: ${reason}`);
  };
  let store: { Root?: V2Node };
  try {
    store = JSON.parse(Buffer.from(snap.data).toString()) as { Root?: V2Node };
  } catch (err) {
    return fail(`not JSON: ${(err as Error).message}`);
  }
  const zero = store.Root?.Children?.["0"];
  const members: EtcdMember[] = [];
  for (const [hex, node] of Object.entries(zero?.Children?.["members"]?.Children ?? {})) {
    if (!/^[0-9a-f]{1,16}$/.test(hex)) fail(`member key ${JSON.stringify(hex)} is not a hex id`);
    const json = (k: string): Record<string, unknown> => {
      const v = node.Children?.[k]?.Value;
      if (v === undefined) return {};
      if (typeof v !== "string") return fail(`member ${hex} ${k} is not a string`);
      try {
        return JSON.parse(v) as Record<string, unknown>;
      } catch {
        return fail(`member ${hex} ${k} is not JSON`);
      }
    };
    const raft = json("raftAttributes");
    const attrs = json("attributes");
    const strings = (v: unknown, what: string): string[] => {
      if (v === undefined || v === null) return [];
      if (!Array.isArray(v) || !v.every((x) => typeof x === "string")) return fail(`member ${hex} ${what} is not a list of strings`);
      return v as string[];
    };
    members.push({
      id: BigInt("0x" + hex),
      name: typeof attrs["name"] === "string" ? attrs["name"] : "",
      peerURLs: strings(raft["peerURLs"], "peerURLs"),
      clientURLs: strings(attrs["clientURLs"], "clientURLs"),
      isLearner: raft["isLearner"] === true,
    });
  }
  const removedMemberIds = Object.keys(zero?.Children?.["removed_members"]?.Children ?? {}).map((hex) => {
    if (!/^[0-9a-f]{1,16}$/.test(hex)) fail(`removed member key ${JSON.stringify(hex)} is not a hex id`);
    return BigInt("0x" + hex);
  });
  const version = zero?.Children?.["version"]?.Value;
  return { members: members.sort((a, b) => (a.id < b.id ? -1 : 1)), removedMemberIds, clusterVersion: typeof version === "string" ? version : undefined };
}
