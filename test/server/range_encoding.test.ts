/**
 * A range encoded as it is read (src/server/range_encoding.ts) is the very RangeResponse the codec
 * writes, byte for byte, and a read that spills answers what an ordinary read answers.
 */
import fs from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { MESSAGE_PREFIX_BYTES } from "../../src/grpc/framing.js";
import type { KvStore } from "../../src/mvcc/kvstore.js";
import { spillable } from "../../src/mvcc/kvstore_range.js";
import { type KeyValue, type RangeRequest, SortOrder, SortTarget } from "../../src/mvcc/types.js";
import type { RangeResponse, RangeResponseInit } from "../../src/pb/member-types.js";
import { loadMemberCodecs } from "../../src/pb/protos.js";
import { RangeEncoding } from "../../src/server/range_encoding.js";
import { b, openStore, plainKv, seedFor, tmpDir } from "../mvcc/helpers.js";
import { mulberry32 } from "../prng.js";

const codec = loadMemberCodecs().message<RangeResponse, RangeResponseInit>("etcdserverpb.RangeResponse");
const HEADER = { clusterId: 0xcdef0123456789abn, memberId: 0x8e9e05c52164694dn, revision: 2 ** 40 + 7, raftTerm: 3 };

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0).reverse()) f();
});

function bytes(rand: () => number, max: number): Buffer {
  const n = Math.floor(rand() * max);
  return Buffer.from(Array.from({ length: n }, () => Math.floor(rand() * 256)));
}

describe("RangeEncoding", () => {
  it("writes the codec's bytes for the same answer, whatever the slices, limit and keys_only", () => {
    const seed = seedFor("range_encoding.codec_bytes");
    const rand = mulberry32(seed);
    const leases: (number | bigint)[] = [0, 1, 0x694d7b2f3c1a, 2 ** 53 - 1, 2n ** 62n + 5n, -1];
    for (let n = 0; n < 300; n++) {
      const kvs: KeyValue[] = Array.from({ length: Math.floor(rand() * 40) }, () => ({
        key: Buffer.concat([Buffer.from("k"), bytes(rand, 300)]),
        value: rand() < 0.2 ? Buffer.alloc(0) : bytes(rand, rand() < 0.05 ? 20_000 : 200),
        createRevision: rand() < 0.1 ? 0 : Math.floor(rand() * 2 ** 45),
        modRevision: Math.floor(rand() * 2 ** 45),
        version: Math.floor(rand() * 1000),
        lease: leases[Math.floor(rand() * leases.length)]!,
      }));
      const req: RangeRequest = { key: b("k"), rangeEnd: b("l") };
      if (rand() < 0.5) req.limit = Math.floor(rand() * 45);
      if (rand() < 0.3) req.keysOnly = true;
      const count = rand() < 0.1 ? 0 : kvs.length + Math.floor(rand() * 2 ** 33);
      const enc = new RangeEncoding(req);
      if (rand() < 0.2) {
        enc.take(kvs.slice(0, 3)); // a restarted read forgets what it took
        enc.reset();
      }
      for (let at = 0; at < kvs.length; ) {
        const next = at + 1 + Math.floor(rand() * 7);
        enc.take(kvs.slice(at, next));
        at = next;
      }
      const limit = req.limit ?? 0;
      const cut = limit > 0 && kvs.length > limit ? kvs.slice(0, limit) : kvs;
      const expected = codec.encode({
        header: HEADER,
        kvs: req.keysOnly ? cut.map((kv) => ({ ...kv, value: Buffer.alloc(0) })) : cut,
        more: limit > 0 && kvs.length > limit,
        count,
      });
      const msg = enc.message(HEADER, count);
      expect(msg.bytes.equals(expected), JSON.stringify({ seed, n })).toBe(true);
      expect(msg.framed.readUInt32BE(1)).toBe(expected.length);
      expect([enc.kvCount, enc.more]).toEqual([cut.length, cut.length < kvs.length]);
    }
  });
});

describe("a range read with a spill", () => {
  function fresh(): KvStore {
    const dir = tmpDir();
    const kv = openStore(dir, { rangeRead: { keysPerTurn: 4, rowsPerTurn: 3 } });
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    cleanup.push(() => {
      if (!kv.isClosed) kv.close();
    });
    return kv;
  }

  it("answers what an ordinary read answers, spilled past its first slice and kept whole within it", async () => {
    const seed = seedFor("range_encoding.spill_reads");
    const rand = mulberry32(seed);
    const kv = fresh();
    const key = (i: number): string => `k${String(i).padStart(3, "0")}`;
    for (let i = 0; i < 300; i++) {
      const k = key(Math.floor(rand() * 60));
      if (rand() < 0.15) kv.deleteRange({ key: b(k) });
      else kv.put({ key: b(k), value: rand() < 0.1 ? Buffer.alloc(0) : b(`v${i}`) });
    }
    const cur = kv.currentRevision();
    let spilled = 0;
    let whole = 0;
    for (let n = 0; n < 200; n++) {
      const lo = Math.floor(rand() * 60);
      const req: RangeRequest = { key: b(key(lo)) };
      if (rand() < 0.8) req.rangeEnd = rand() < 0.2 ? Buffer.from([0]) : b(key(lo + 1 + Math.floor(rand() * 50)));
      if (rand() < 0.3) req.limit = 1 + Math.floor(rand() * 12);
      if (rand() < 0.3) req.revision = 1 + Math.floor(rand() * cur);
      if (rand() < 0.15) req.countOnly = true;
      if (rand() < 0.15) req.keysOnly = true;
      if (rand() < 0.15) req.sortOrder = SortOrder.ASCEND; // by key: the read's own order
      expect(spillable(req)).toBe(true);
      const want = kv.range(req);
      const enc = new RangeEncoding(req);
      const got = await kv.rangeAsync(req, undefined, enc);
      expect(got.revision).toBe(cur);
      if (got.spilled) {
        spilled++;
        expect(got.kvs).toEqual([]);
        const decoded = codec.decode(enc.message({ ...HEADER, revision: got.revision }, got.count).framed.subarray(MESSAGE_PREFIX_BYTES));
        expect({ kvs: decoded.kvs.map(plainKv), more: decoded.more, count: decoded.count }, JSON.stringify({ seed, n, req })).toEqual({
          kvs: want.kvs.map(plainKv),
          more: want.more,
          count: want.count,
        });
      } else {
        whole++;
        expect(enc.kvCount).toBe(0);
        expect({ kvs: got.kvs.map(plainKv), more: got.more, count: got.count }).toEqual({ kvs: want.kvs.map(plainKv), more: want.more, count: want.count });
      }
    }
    expect(spilled, "reads that needed more than one slice").toBeGreaterThan(20);
    expect(whole, "reads done within one slice").toBeGreaterThan(20);
  });

  it("is refused for a range whose answer needs every kv at once (a sort or a filter)", async () => {
    const kv = fresh();
    for (const req of [
      { key: b("a"), sortOrder: SortOrder.DESCEND },
      { key: b("a"), sortTarget: SortTarget.MOD },
      { key: b("a"), minModRevision: 2 },
      { key: b("a"), maxCreateRevision: 2 },
    ] satisfies RangeRequest[]) {
      expect(spillable(req)).toBe(false);
      await expect(kv.rangeAsync(req, undefined, new RangeEncoding(req))).rejects.toThrow(/a spill given for a range whose answer needs all its kvs at once/);
    }
  });
});
