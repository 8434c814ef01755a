/**
 * A power cut that keeps a later unsynced write and loses an earlier one (a page cache may write
 * back in any order what was never synced). The WAL writes only commit-only hard states without a
 * sync, so such a hole followed by commit-only hard states of the same term and vote is repaired;
 * a hole followed by anything a durable write would carry stays corruption (lost_write.ts).
 * Seen in CI: chaos seed 20240607, a leader's power cut lost a 40-byte write and kept the next.
 */
import fs from "node:fs";
import path from "node:path";
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import type { HardState } from "../../src/raft/types.js";
import { scanSegment } from "../../src/wal/decoder.js";
import type { WalLogger } from "../../src/wal/logger.js";
import { RecordType } from "../../src/wal/record.js";
import { WAL } from "../../src/wal/wal.js";
import { isIntact, makeEntries, makeTmpDir, removeDir, walFiles } from "./helpers.js";

const MIB = { segmentSizeBytes: 1024 * 1024 };
const SNAP0 = { index: 0, term: 0 };
let root: string;
let dir: string;

beforeEach(() => {
  root = makeTmpDir("wal-lost-write");
  dir = path.join(root, "wal");
});
afterEach(() => removeDir(root));

/** A WAL of entries 1..5 (durable, term 1, vote 1) and then `saves` (written in order, closed). */
async function build(saves: Array<{ hs: HardState; entries?: number[] }>): Promise<string> {
  const wal = await WAL.create(dir, { memberId: 1n, clusterId: 2n }, MIB);
  await wal.save({ term: 1, vote: 1n, commit: 0 }, makeEntries(1, 5, 1));
  for (const s of saves) await wal.save(s.hs, s.entries ? makeEntries(s.entries[0]!, s.entries[1]!, s.hs.term) : []);
  await wal.close();
  return path.join(dir, walFiles(dir).at(-1)!);
}

/** The records of the last segment after the last entry record, as [offset, end, type]. */
function tailRecords(file: string): Array<{ offset: number; end: number; type: RecordType }> {
  const scan = scanSegment(fs.readFileSync(file), undefined);
  expect(scan.failure).toBeUndefined();
  return scan.records.map((r) => ({ offset: r.offset, end: r.offset + r.totalBytes, type: r.type }));
}

function zero(file: string, from: number, to: number): void {
  const buf = fs.readFileSync(file);
  buf.fill(0, from, to);
  fs.writeFileSync(file, buf);
}

function recordingLogger(lines: string[]): WalLogger {
  const log = (o: object, msg: string) => lines.push(`${msg} ${JSON.stringify(o, (_k, v: unknown) => (typeof v === "bigint" ? String(v) : v))}`);
  return { info: log, warn: log, error: log };
}

describe("a lost unsynced write before a kept one", () => {
  it("repairs a lost commit-only hard state followed by later ones of the same term and vote: entries intact, commit from before the hole", async () => {
    const file = await build([
      { hs: { term: 1, vote: 1n, commit: 2 } },
      { hs: { term: 1, vote: 1n, commit: 3 } },
      { hs: { term: 1, vote: 1n, commit: 4 } },
      { hs: { term: 1, vote: 1n, commit: 5 } },
    ]);
    const rs = tailRecords(file);
    const hss = rs.filter((r) => r.type === RecordType.HardState);
    const lost = hss.at(-3)!; // commit 3 lost; commit 4 and 5 kept
    zero(file, lost.offset, lost.end);
    const lines: string[] = [];
    const r = await WAL.open(dir, SNAP0, { ...MIB, logger: recordingLogger(lines) });
    expect(r.entries.map((e) => e.index)).toEqual([1, 2, 3, 4, 5]);
    expect(r.entries.every(isIntact)).toBe(true);
    expect(r.hardState).toEqual({ term: 1, vote: 1n, commit: 2 });
    expect(lines.some((l) => l.startsWith("repairing torn WAL tail") && l.includes(`"offset":${lost.offset}`) && l.includes("2 later commit-only"))).toBe(true);
    // The repair zeroed what followed the hole; the log goes on from there and reads back whole.
    expect(fs.readFileSync(file).subarray(lost.offset, hss.at(-1)!.end).every((b) => b === 0)).toBe(true);
    await r.wal.save({ term: 2, vote: 2n, commit: 5 }, makeEntries(6, 7, 2));
    await r.wal.close();
    const again = await WAL.open(dir, SNAP0, MIB);
    expect(again.entries.map((e) => e.index)).toEqual([1, 2, 3, 4, 5, 6, 7]);
    expect(again.hardState).toEqual({ term: 2, vote: 2n, commit: 5 });
    await again.wal.close();
  });

  it("repairs a lost write followed by the newest write torn at every length (the cut in CI: 40 bytes lost, the next write's prefix kept)", async () => {
    const file = await build([
      { hs: { term: 1, vote: 1n, commit: 2 } },
      { hs: { term: 1, vote: 1n, commit: 3 } },
      { hs: { term: 1, vote: 1n, commit: 4 } },
    ]);
    const pristine = fs.readFileSync(file);
    const hss = tailRecords(file).filter((r) => r.type === RecordType.HardState);
    const lost = hss.at(-2)!;
    const newest = hss.at(-1)!;
    for (let kept = 1; kept <= newest.end - newest.offset; kept++) {
      const buf = Buffer.from(pristine);
      buf.fill(0, lost.offset, lost.end);
      buf.fill(0, newest.offset + kept, newest.end);
      fs.writeFileSync(file, buf);
      const r = await WAL.open(dir, SNAP0, MIB);
      expect(r.entries.map((e) => e.index), `kept ${kept}`).toEqual([1, 2, 3, 4, 5]);
      expect(r.hardState, `kept ${kept}`).toEqual({ term: 1, vote: 1n, commit: 2 });
      await r.wal.close();
    }
  });

  it("refuses a lost write followed by a torn record that is not a hard state of that term and vote", async () => {
    const file = await build([{ hs: { term: 1, vote: 1n, commit: 2 } }, { hs: { term: 1, vote: 1n, commit: 3 } }, { hs: { term: 1, vote: 1n, commit: 4 } }]);
    const hss = tailRecords(file).filter((r) => r.type === RecordType.HardState);
    const buf = fs.readFileSync(file);
    buf.fill(0, hss.at(-2)!.offset, hss.at(-2)!.end);
    buf.fill(0, hss.at(-1)!.offset + 30, hss.at(-1)!.end);
    buf[hss.at(-1)!.offset + 16] ^= 0x02; // term 1 → 3 in what was kept
    fs.writeFileSync(file, buf);
    await expect(WAL.open(dir, SNAP0, MIB)).rejects.toThrow(new RegExp(`after the end of records in ${file} at offset ${hss.at(-2)!.offset}`));
  });

  it("refuses a hole followed by an entry (a durable write after the hole would have filled it: the hole is damage)", async () => {
    const file = await build([{ hs: { term: 1, vote: 1n, commit: 2 } }, { hs: { term: 1, vote: 1n, commit: 3 }, entries: [6, 6] }]);
    const hs = tailRecords(file).filter((r) => r.type === RecordType.HardState).at(-2)!;
    zero(file, hs.offset, hs.end);
    await expect(WAL.open(dir, SNAP0, MIB)).rejects.toThrow(new RegExp(`after the end of records in ${file} at offset ${hs.offset}`));
  });

  it("refuses a hole followed by a hard state of a new term or vote (written durably, so the hole was synced)", async () => {
    const file = await build([{ hs: { term: 1, vote: 1n, commit: 2 } }, { hs: { term: 2, vote: 3n, commit: 2 } }]);
    const hs = tailRecords(file).filter((r) => r.type === RecordType.HardState).at(-2)!;
    zero(file, hs.offset, hs.end);
    await expect(WAL.open(dir, SNAP0, MIB)).rejects.toThrow(new RegExp(`after the end of records in ${file} at offset ${hs.offset}`));
  });

  it("refuses a zeroed header alone (its payload is still there: not a lost write)", async () => {
    const file = await build([{ hs: { term: 1, vote: 1n, commit: 2 } }, { hs: { term: 1, vote: 1n, commit: 3 } }]);
    const hs = tailRecords(file).filter((r) => r.type === RecordType.HardState).at(-2)!;
    zero(file, hs.offset, hs.offset + 16);
    await expect(WAL.open(dir, SNAP0, MIB)).rejects.toThrow(new RegExp(`after the end of records in ${file} at offset ${hs.offset}`));
  });

  it("refuses when a kept record after the hole breaks the chain of the ones after it", async () => {
    const file = await build([
      { hs: { term: 1, vote: 1n, commit: 2 } },
      { hs: { term: 1, vote: 1n, commit: 3 } },
      { hs: { term: 1, vote: 1n, commit: 4 } },
    ]);
    const hss = tailRecords(file).filter((r) => r.type === RecordType.HardState);
    zero(file, hss.at(-3)!.offset, hss.at(-3)!.end);
    const buf = fs.readFileSync(file);
    buf[hss.at(-1)!.offset + 16 + 16] ^= 0x01; // the last record's commit: its CRC, seeded by the one before, fails
    fs.writeFileSync(file, buf);
    await expect(WAL.open(dir, SNAP0, MIB)).rejects.toThrow(new RegExp(`after the end of records in ${file} at offset ${hss.at(-3)!.offset}`));
  });

  it("refuses a lost entry record followed by hard states (the hole is not whole hard-state records)", async () => {
    const file = await build([{ hs: { term: 1, vote: 1n, commit: 2 } }, { hs: { term: 1, vote: 1n, commit: 3 } }]);
    const rs = tailRecords(file);
    const lastEntry = rs.filter((r) => r.type === RecordType.Entry).at(-1)!;
    zero(file, lastEntry.offset, lastEntry.end);
    await expect(WAL.open(dir, SNAP0, MIB)).rejects.toThrow(new RegExp(`after the end of records in ${file} at offset ${lastEntry.offset}`));
  });
});
