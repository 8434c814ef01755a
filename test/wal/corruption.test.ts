/**
 * Damage a closed WAL (flip a byte, truncate a file) at seeded random places and reopen it. Every
 * case must end in one of two ways:
 *  - a repair of the last segment's tail that loses nothing but its last record(s) cut by the damage,
 *  - a WalCorruptionError whose message names the file and the byte offset (at or before the damage);
 * never a silent skip of data, never an unexplained exception. Replay a run with SEED=<n>.
 */
import fs from "node:fs";
import path from "node:path";
import { afterAll, beforeAll, describe, expect, it } from "vitest";
import type { Entry, HardState } from "../../src/raft/types.js";
import { scanSegment } from "../../src/wal/decoder.js";
import { WalCorruptionError } from "../../src/wal/errors.js";
import type { WalLogger } from "../../src/wal/logger.js";
import { RecordType, readEntryPayload } from "../../src/wal/record.js";
import { WAL } from "../../src/wal/wal.js";
import { isIntact, makeEntries, makeTmpDir, prng, removeDir, testSeed, walFiles } from "./helpers.js";

const OPTS = { segmentSizeBytes: 2048 };
const SNAP0 = { index: 0, term: 0 };

interface SegmentInfo {
  file: string;
  size: number;
  /** End of records (start of the zero tail, if any). */
  dataEnd: number;
  records: { offset: number; end: number; type: RecordType; entryIndex?: number }[];
}

interface Base {
  dir: string;
  entries: Entry[];
  hardState: HardState;
  segments: SegmentInfo[];
}

function ids(es: Entry[]): string[] {
  return es.map((e) => `${e.index}/${e.term}`);
}

function describeSegments(dir: string): SegmentInfo[] {
  let chain: number | undefined;
  return walFiles(dir).map((file) => {
    const buf = fs.readFileSync(path.join(dir, file));
    const scan = scanSegment(buf, chain);
    chain = scan.chainCrc;
    expect(scan.failure).toBeUndefined();
    return {
      file,
      size: buf.length,
      dataEnd: scan.endOffset,
      records: scan.records.map((r) => ({
        offset: r.offset,
        end: r.offset + r.totalBytes,
        type: r.type,
        entryIndex: r.type === RecordType.Entry ? readEntryPayload(r.payload).index : undefined,
      })),
    };
  });
}

function recorder(): { logger: WalLogger; warnings: string[] } {
  const warnings: string[] = [];
  return { logger: { info: () => {}, error: () => {}, warn: (obj, msg) => warnings.push(`${msg} ${JSON.stringify(obj)}`) }, warnings };
}

async function buildBase(root: string): Promise<Base> {
  const dir = path.join(root, "base");
  const wal = await WAL.create(dir, { memberId: 5n, clusterId: 9n }, OPTS);
  let next = 1;
  const rand = prng(42);
  for (let s = 0; s < 40; s++) {
    const n = 1 + Math.floor(rand() * 4);
    // Sizes include multiples of zero-ending data and entries bigger than a 512-byte sector.
    await wal.save({ term: 1, vote: 5n, commit: next - 1 }, makeEntries(next, next + n - 1, 1, Math.floor(rand() * 700)));
    next += n;
  }
  await wal.close();
  const r = await WAL.open(dir, SNAP0, OPTS);
  await r.wal.close();
  return { dir, entries: r.entries, hardState: r.hardState, segments: describeSegments(dir) };
}

type Outcome = { kind: "ok"; entries: Entry[]; hardState: HardState; warnings: string[] } | { kind: "error"; err: unknown };

async function reopen(dir: string): Promise<Outcome> {
  const { logger, warnings } = recorder();
  try {
    const r = await WAL.open(dir, SNAP0, { ...OPTS, logger });
    await r.wal.close();
    return { kind: "ok", entries: r.entries, hardState: r.hardState, warnings };
  } catch (err) {
    return { kind: "error", err };
  }
}

describe("WAL corruption handling", () => {
  let root: string;
  let base: Base;
  beforeAll(async () => {
    root = makeTmpDir("corrupt");
    base = await buildBase(root);
    expect(base.segments.length).toBeGreaterThan(5);
  });
  afterAll(() => removeDir(root));

  function copyBase(name: string): string {
    const dir = path.join(root, name);
    fs.cpSync(base.dir, dir, { recursive: true });
    return dir;
  }

  /**
   * The random cases share one working copy and restore the touched files afterwards: creating
   * and unlinking hundreds of files is slow on a disk mounted with `discard`.
   */
  let work: string | undefined;
  function workingCopy(): string {
    work ??= copyBase("work");
    return work;
  }
  function restore(dir: string, files: string[]): void {
    for (const f of files) fs.writeFileSync(path.join(dir, f), fs.readFileSync(path.join(base.dir, f)));
  }

  const lastSeg = (): SegmentInfo => base.segments[base.segments.length - 1]!;

  /** Checks a successful reopen: a prefix of the original, losing only records at or after `from` in the last segment. */
  function expectRepairedPrefix(o: Extract<Outcome, { kind: "ok" }>, lostFromOffset: number, ctx: string): void {
    expect(o.entries.every(isIntact), ctx).toBe(true);
    const lastSegEntries = lastSeg().records.filter((r) => r.type === RecordType.Entry && r.end > lostFromOffset).map((r) => r.entryIndex!);
    const keep = base.entries.filter((e) => !lastSegEntries.includes(e.index));
    expect(ids(o.entries), ctx).toEqual(ids(keep));
  }

  function expectNamedError(o: Outcome, files: string[], atOrBefore: number | undefined, ctx: string): void {
    expect(o.kind, ctx).toBe("error");
    if (o.kind !== "error") return;
    expect(o.err, `${ctx}: ${String(o.err)}`).toBeInstanceOf(WalCorruptionError);
    const err = o.err as WalCorruptionError;
    expect(err.message).toContain(err.file);
    expect(err.message).toMatch(/at offset \d+/);
    expect(files.map((f) => path.basename(f)), `${ctx}: ${err.message}`).toContain(path.basename(err.file));
    if (atOrBefore !== undefined && path.basename(err.file) === files[0]) expect(err.offset, `${ctx}: ${err.message}`).toBeLessThanOrEqual(atOrBefore);
  }

  it("flips random bytes: repair of the last record only, otherwise an error naming file and offset", async () => {
    const seed = testSeed("wal corruption: flips");
    const rand = prng(seed);
    let errors = 0;
    let repairs = 0;
    for (let c = 0; c < 200; c++) {
      const seg = base.segments[Math.floor(rand() * base.segments.length)]!;
      const isLast = seg === lastSeg();
      // Mostly inside the records; sometimes in the preallocated zero tail of the last segment.
      const inData = rand() < 0.85 || seg.size === seg.dataEnd;
      const offset = inData ? Math.floor(rand() * seg.dataEnd) : seg.dataEnd + Math.floor(rand() * (seg.size - seg.dataEnd));
      const xor = 1 + Math.floor(rand() * 255);
      const ctx = `seed ${seed} case ${c}: flip ${seg.file}@${offset} ^${xor}`;
      const dir = workingCopy();
      const file = path.join(dir, seg.file);
      const buf = fs.readFileSync(file);
      buf[offset] = buf[offset]! ^ xor;
      fs.writeFileSync(file, buf);
      const o = await reopen(dir);
      if (o.kind === "error") {
        errors++;
        expectNamedError(o, [seg.file], offset, ctx);
      } else {
        // Success is only possible for damage in the last segment's last record or its zero tail.
        expect(isLast, ctx).toBe(true);
        const lastRecord = seg.records[seg.records.length - 1]!;
        expect(offset, ctx).toBeGreaterThanOrEqual(lastRecord.offset);
        expectRepairedPrefix(o, offset >= seg.dataEnd ? seg.dataEnd : lastRecord.offset, ctx);
        expect(o.warnings.some((w) => w.startsWith("repairing torn WAL tail")), ctx).toBe(true);
        repairs++;
        // The repair is durable and the log is usable again.
        const again = await reopen(dir);
        expect(again.kind, ctx).toBe("ok");
      }
      restore(dir, [seg.file, lastSeg().file]);
    }
    console.log(`flips: ${errors} clear errors, ${repairs} tail repairs`);
    expect(errors).toBeGreaterThan(0);
  });

  it("truncates files at random offsets: tail repair in the last segment, otherwise an error naming the file", async () => {
    const seed = testSeed("wal corruption: truncations");
    const rand = prng(seed);
    let errors = 0;
    let repairs = 0;
    for (let c = 0; c < 200; c++) {
      const k = Math.floor(rand() * base.segments.length);
      const seg = base.segments[k]!;
      const isLast = k === base.segments.length - 1;
      const cut = Math.floor(rand() * seg.size);
      const ctx = `seed ${seed} case ${c}: truncate ${seg.file} to ${cut}`;
      const dir = workingCopy();
      fs.truncateSync(path.join(dir, seg.file), cut);
      const o = await reopen(dir);
      const headerEnd = seg.records[1]!.end;
      if (isLast && cut >= headerEnd) {
        expect(o.kind, `${ctx}: ${o.kind === "error" ? String(o.err) : ""}`).toBe("ok");
        if (o.kind === "ok") expectRepairedPrefix(o, cut, ctx);
        repairs++;
      } else if (cut >= seg.dataEnd) {
        expect(o.kind, ctx).toBe("ok"); // only zeros were cut
        if (o.kind === "ok") expect(ids(o.entries)).toEqual(ids(base.entries));
      } else {
        errors++;
        // A cut exactly at a record boundary shows up where the chain continues: the next file.
        const next = base.segments[k + 1]?.file;
        expectNamedError(o, next ? [seg.file, next] : [seg.file], cut, ctx);
      }
      restore(dir, [seg.file, lastSeg().file]);
    }
    console.log(`truncations: ${errors} clear errors, ${repairs} tail repairs`);
    expect(errors).toBeGreaterThan(0);
    expect(repairs).toBeGreaterThan(0);
  });

  it("tears the last segment at random offsets (a write cut short): always repaired, the prefix kept", async () => {
    const seed = testSeed("wal corruption: tears");
    const rand = prng(seed);
    const seg = lastSeg();
    const headerEnd = seg.records[1]!.end;
    for (let c = 0; c < 60; c++) {
      const at = headerEnd + Math.floor(rand() * (seg.dataEnd - headerEnd));
      const ctx = `seed ${seed} case ${c}: zero ${seg.file} from ${at}`;
      const dir = workingCopy();
      const file = path.join(dir, seg.file);
      const buf = fs.readFileSync(file);
      buf.fill(0, at);
      fs.writeFileSync(file, buf);
      const o = await reopen(dir);
      expect(o.kind, `${ctx}: ${o.kind === "error" ? String(o.err) : ""}`).toBe("ok");
      if (o.kind === "ok") expectRepairedPrefix(o, at, ctx);
      restore(dir, [seg.file]);
    }
  });

  it("repairs a torn last record, logs it, and appends after it", async () => {
    const dir = copyBase("torn");
    const seg = lastSeg();
    const lastEntry = [...seg.records].reverse().find((r) => r.type === RecordType.Entry)!;
    // Zero the second half of the last entry record and everything after: a write cut short.
    const file = path.join(dir, seg.file);
    const buf = fs.readFileSync(file);
    const cutAt = lastEntry.offset + Math.ceil((lastEntry.end - lastEntry.offset) / 2);
    buf.fill(0, cutAt);
    fs.writeFileSync(file, buf);
    const { logger, warnings } = recorder();
    const r = await WAL.open(dir, SNAP0, { ...OPTS, logger });
    expect(ids(r.entries)).toEqual(ids(base.entries.slice(0, -1)));
    expect(warnings.join("\n")).toMatch(new RegExp(`repairing torn WAL tail.*${seg.file}.*"offset":${lastEntry.offset}`));
    const last = r.entries[r.entries.length - 1]!;
    await r.wal.save(undefined, makeEntries(last.index + 1, last.index + 3, 2, 100));
    await r.wal.close();
    const again = await WAL.open(dir, SNAP0, OPTS);
    expect(again.entries.length).toBe(base.entries.length + 2);
    await again.wal.close();
  });

  it("refuses a damaged record in the middle of the last segment", async () => {
    const dir = copyBase("middle");
    const seg = lastSeg();
    const victim = seg.records.find((r) => r.type === RecordType.Entry)!;
    expect(victim).not.toBe(seg.records[seg.records.length - 1]);
    const file = path.join(dir, seg.file);
    const buf = fs.readFileSync(file);
    buf[victim.offset + 20] ^= 0x01;
    fs.writeFileSync(file, buf);
    await expect(WAL.open(dir, SNAP0, OPTS)).rejects.toThrow(`wal: crc mismatch in ${file} at offset ${victim.offset}`);
  });

  it("refuses a zeroed record header in the middle (it must not pass for the end of data)", async () => {
    const dir = copyBase("zeroed-header");
    const seg = lastSeg();
    const victim = seg.records[3]!;
    const file = path.join(dir, seg.file);
    const buf = fs.readFileSync(file);
    buf.fill(0, victim.offset, victim.offset + 16);
    fs.writeFileSync(file, buf);
    await expect(WAL.open(dir, SNAP0, OPTS)).rejects.toThrow(new RegExp(`after the end of records in ${file} at offset ${victim.offset}`));
  });

  it("refuses a missing segment in the middle", async () => {
    const dir = copyBase("missing");
    fs.rmSync(path.join(dir, base.segments[2]!.file));
    await expect(WAL.open(dir, SNAP0, OPTS)).rejects.toThrow(/segment sequence gap/);
  });

  it("refuses two segments swapped in content (the CRC chain breaks)", async () => {
    const dir = copyBase("swapped");
    const a = path.join(dir, base.segments[2]!.file);
    const b = path.join(dir, base.segments[3]!.file);
    const bufA = fs.readFileSync(a);
    fs.writeFileSync(a, fs.readFileSync(b));
    fs.writeFileSync(b, bufA);
    await expect(WAL.open(dir, SNAP0, OPTS)).rejects.toThrow(/crc mismatch: segment continues chain/);
  });
});
