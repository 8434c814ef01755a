/**
 * Real etcd 3.4's data dirs for the WAL/.snap reader and import tests: a member started with a
 * small --snapshot-count (so it writes .snap files and keeps entries after them), some writes, a
 * clean stop. The member advertises a fixed peer URL with a fixed cluster token, so its member and
 * cluster ids are known.
 */
import { RealEtcd } from "../bbolt/real_etcd.js";

export const IMPORT_TOKEN = "etcetera-import-1504462";
export const IMPORT_PEER_URL = "http://127.0.0.1:1";
/** etcd's id for IMPORT_PEER_URL and IMPORT_TOKEN. */
export const IMPORT_MEMBER_ID = 0x3d04818883d79n;
export const IMPORT_CLUSTER_ID = 0xd6d9d304eb83an;

/** Starts real etcd in `dir`, puts `puts` keys, stops it; returns the member's data dir. */
export async function stoppedEtcdMember(dir: string, puts: number, snapshotCount = 10): Promise<string> {
  const etcd = await RealEtcd.create(dir);
  await etcd.start([
    `--snapshot-count=${snapshotCount}`,
    `--initial-advertise-peer-urls=${IMPORT_PEER_URL}`,
    `--initial-cluster=n1=${IMPORT_PEER_URL}`,
    `--initial-cluster-token=${IMPORT_TOKEN}`,
  ]);
  try {
    for (let i = 0; i < puts; i++) await etcd.ok(["put", `key-${i % 13}`, `value-${i}`]);
    await etcd.ok(["del", "key-3"]);
    await etcd.ok(["compact", String(Math.floor(puts / 2))]);
  } finally {
    await etcd.stop();
  }
  return etcd.dataDir;
}

/** Where each record of an etcd WAL segment starts and ends, up to its first zero length (wal/decoder.go's framing). */
export function etcdWalRecords(segment: Buffer): { start: number; end: number }[] {
  const records: { start: number; end: number }[] = [];
  for (let off = 0; off + 8 <= segment.length; ) {
    const len = segment.readBigUInt64LE(off);
    if (len === 0n) break;
    const end = off + 8 + Number(len & 0x00ffffffffffffffn) + (len >= 1n << 63n ? Number((len >> 56n) & 7n) : 0);
    records.push({ start: off, end });
    off = end;
  }
  return records;
}
