/**
 * The etcd WAL and .snap readers on files real etcd 3.4 wrote: the member's identity, the hard
 * state, the entries after the snapshot (contiguous, ending at or after the backend's consistent
 * index), the snapshot markers, and the membership in the v2 store.
 */
import { cpSync, copyFileSync, mkdtempSync, readdirSync, readFileSync, rmSync, truncateSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import {
  decodeEtcdConfChange,
  ETCD_ENTRY_CONF_CHANGE,
  ETCD_ENTRY_NORMAL,
  EtcdBackendReader,
  EtcdFileError,
  etcdV2Cluster,
  readEtcdWal,
  readNewestEtcdSnap,
} from "../../src/etcd_format/index.js";
import { etcdWalRecords, IMPORT_CLUSTER_ID, IMPORT_MEMBER_ID, IMPORT_PEER_URL, stoppedEtcdMember } from "./etcd_data.js";

const dir = mkdtempSync(join(tmpdir(), "etcetera-etcd-wal-"));
let dataDir: string;
beforeAll(async () => {
  dataDir = await stoppedEtcdMember(dir, 35);
}, 60_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe("etcd 3.4's WAL and .snap files", () => {
  it("reads the newest .snap: metadata, configuration and the v2 store's membership", () => {
    const snap = readNewestEtcdSnap(join(dataDir, "member", "snap"));
    expect(snap).toBeDefined();
    // 35 puts, a delete, a compaction and the start-up entries with --snapshot-count=10: snapshots at 11, 22, 33.
    expect(snap!.metadata.index).toBeGreaterThanOrEqual(33);
    expect(snap!.metadata.confState.voters).toEqual([IMPORT_MEMBER_ID]);
    const v2 = etcdV2Cluster(snap!);
    expect(v2.members).toEqual([{ id: IMPORT_MEMBER_ID, name: "n1", peerURLs: [IMPORT_PEER_URL], clientURLs: [expect.stringMatching(/^http:\/\/127\.0\.0\.1:\d+$/)], isLearner: false }]);
    expect(v2.clusterVersion).toBe("3.4.0");
  });

  it("reads the WAL from the snapshot: identity, hard state, contiguous entries up to the backend's index", () => {
    const snap = readNewestEtcdSnap(join(dataDir, "member", "snap"))!;
    const from = { index: snap.metadata.index, term: snap.metadata.term };
    const wal = readEtcdWal(join(dataDir, "member", "wal"), { from });
    expect(wal.metadata).toEqual({ nodeId: IMPORT_MEMBER_ID, clusterId: IMPORT_CLUSTER_ID });
    expect(wal.hardState.vote).toBe(IMPORT_MEMBER_ID);
    expect(wal.snapshots).toContainEqual(from);
    wal.entries.forEach((e, i) => expect(e.index).toBe(from.index + 1 + i));
    const db = EtcdBackendReader.open(join(dataDir, "member", "snap", "db"));
    try {
      const ci = Number(db.consistentIndex());
      // A clean stop: the backend and the last hard state agree to within the final entry, either
      // way (seen: commit 40 with consistent index 41, and commit 41 with 40): the import applies
      // what the backend lacks and takes the larger as its commit.
      expect(Math.abs(ci - wal.hardState.commit)).toBeLessThanOrEqual(1);
      expect(wal.entries.at(-1)!.index).toBeGreaterThanOrEqual(ci);
    } finally {
      db.close();
    }
  });

  it("reads the whole WAL from its start: the bootstrap conf change, then the puts", () => {
    const wal = readEtcdWal(join(dataDir, "member", "wal"));
    expect(wal.entries[0]!.index).toBe(1);
    expect(wal.entries[0]!.type).toBe(ETCD_ENTRY_CONF_CHANGE);
    const cc = decodeEtcdConfChange(wal.entries[0]!.data);
    expect(cc.nodeId).toBe(IMPORT_MEMBER_ID);
    expect(Buffer.from(cc.context).toString()).toContain(IMPORT_PEER_URL);
    const puts = wal.entries.filter((e) => e.type === ETCD_ENTRY_NORMAL && Buffer.from(e.data).includes(Buffer.from("value-34")));
    expect(puts).toHaveLength(1);
    expect(wal.snapshots.length).toBeGreaterThanOrEqual(4);
  });

  it("reads a last segment etcd's repair cut short (its <segment>.broken beside it), and refuses one cut short without it", () => {
    const good = readEtcdWal(join(dataDir, "member", "wal"));
    const walDir = join(dir, "repaired-wal");
    rmSync(walDir, { recursive: true, force: true });
    cpSync(join(dataDir, "member", "wal"), walDir, { recursive: true });
    const name = readdirSync(walDir).filter((n) => n.endsWith(".wal")).sort().at(-1)!;
    const buf = readFileSync(join(walDir, name));
    // What wal.Repair leaves: the segment up to a record boundary (here, before its last five records).
    const starts = etcdWalRecords(buf).map((r) => r.start);
    truncateSync(join(walDir, name), starts.at(-5)!);
    expect(() => readEtcdWal(walDir)).toThrow(new RegExp(`${name}: byte offset ${starts.at(-5)}: the last segment is .* truncated \\(etcd's own repair leaves ${name}\\.broken`));
    copyFileSync(join(dataDir, "member", "wal", name), join(walDir, `${name}.broken`));
    const repaired = readEtcdWal(walDir);
    expect(repaired.repairedBy).toBe(join(walDir, `${name}.broken`));
    expect(good.repairedBy).toBeUndefined();
    expect(repaired.entries.length).toBeGreaterThan(0);
    expect(repaired.entries.length).toBeLessThan(good.entries.length);
    expect(repaired.entries).toEqual(good.entries.slice(0, repaired.entries.length));
  });

  it("refuses a snapshot marker the WAL does not hold, naming the file", () => {
    expect(() => readEtcdWal(join(dataDir, "member", "wal"), { from: { index: 5, term: 2 } })).toThrow(EtcdFileError);
    expect(() => readEtcdWal(join(dataDir, "member", "wal"), { from: { index: 5, term: 2 } })).toThrow(/0000000000000000-0000000000000000\.wal: byte offset 0: no snapshot marker for index 5/);
  });
});
