/**
 * The CI case of chaos seed 20240607 on a real FUSE mount: a power cut loses an unsynced write
 * and keeps a torn prefix of the next one (lazyfs drops everything not durable and tears the
 * newest write). The WAL writes only commit-only hard states unsynced (kept in memory until the
 * next durable write, written in place by a clean stop), so the member must start
 * on what is left, with every durable entry, instead of refusing the hole as corruption
 * (src/wal/lost_write.ts). Each seed tears at a different length.
 */
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { WAL } from "../../src/wal/wal.js";
import { isIntact, makeEntries } from "../wal/helpers.js";
import { LazyFs, isMounted, scratch, unmountAll } from "./lazyfs.js";

const OPTS = { segmentSizeBytes: 1024 * 1024 };
let s = scratch("wal-lost-write");

afterEach(async () => {
  await unmountAll();
  s.remove();
  s = scratch("wal-lost-write");
});
afterAll(async () => {
  await unmountAll();
  s.remove();
  expect(isMounted(s.mnt)).toBe(false);
});

describe("WAL after a power cut that lost an unsynced write and tore the next", () => {
  for (const seed of [1, 7, 20240607, 31337]) {
    it(`starts with every durable entry (seed ${seed})`, async () => {
      let fs = await LazyFs.mount({ disk: s.disk, work: s.work, mountpoint: s.mnt, log: s.log, seed, tear: true });
      const dir = join(s.mnt, "wal");
      const wal = await WAL.create(dir, { memberId: 1n, clusterId: 2n }, OPTS);
      await wal.save({ term: 1, vote: 1n, commit: 0 }, makeEntries(1, 5, 1));
      // A commit-only hard state waits in memory for the next durable write; a clean close writes
      // it in place, unsynced. Two clean stops give two such writes.
      await wal.save({ term: 1, vote: 1n, commit: 3 }, []);
      await wal.close();
      const restarted = await WAL.open(dir, { index: 0, term: 0 }, OPTS);
      expect(restarted.hardState).toEqual({ term: 1, vote: 1n, commit: 3 });
      await restarted.wal.save({ term: 1, vote: 1n, commit: 5 }, []);
      await restarted.wal.close();
      const log = await fs.powerCut();
      // Both commit-only writes were lost, then a prefix of the newest put back: the hole is the first.
      expect(log).toMatch(/lost-write file=\/wal\/\S+\.wal id=\d+ off=\d+ len=80\b/);
      expect(log).toMatch(/torn-write file=\/wal\/\S+\.wal id=\d+ off=\d+ len=40 kept=\d+/);
      fs = await LazyFs.mount({ disk: s.disk, work: s.work, mountpoint: s.mnt });
      const r = await WAL.open(dir, { index: 0, term: 0 }, OPTS);
      expect(r.entries.map((e) => e.index)).toEqual([1, 2, 3, 4, 5]);
      expect(r.entries.every(isIntact)).toBe(true);
      expect(r.hardState).toEqual({ term: 1, vote: 1n, commit: 0 });
      // The repaired log takes new records and reads back whole.
      await r.wal.save({ term: 2, vote: 1n, commit: 5 }, makeEntries(6, 6, 2));
      await r.wal.close();
      const again = await WAL.open(dir, { index: 0, term: 0 }, OPTS);
      expect(again.entries.map((e) => e.index)).toEqual([1, 2, 3, 4, 5, 6]);
      await again.wal.close();
      await fs.unmount();
    });
  }
});
