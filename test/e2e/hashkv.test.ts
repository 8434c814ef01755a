/**
 * HashKV is etcd's own hash (mvcc/kvstore.go hashKV): CRC-32C over "key", then each revision's
 * bbolt key (8-byte main, '_', 8-byte sub, 't' for a tombstone) and its value, the marshalled
 * mvccpb.KeyValue (a tombstone's holding its key alone), the revisions at or below the compaction
 * only as Keep(rev) names them. The test computes that from the member's own history, read back
 * through a Watch from revision 1, and asks the member's HashKV at every revision, before and after
 * a compaction, and after every key is gone. E2E_TARGET=etcd runs the same expectations against
 * real etcd 3.4: the oracle is etcd's algorithm, so `etcdctl endpoint hashkv` agrees between etcd
 * and etcetera holding the same data (an imported data dir, a restored snapshot).
 */
import type * as grpc from "@grpc/grpc-js";
import { describe, expect, it } from "vitest";
import { Crc32c } from "../../src/mvcc/crc32c.js";
import { unary } from "./grpc_client.js";
import { oneMemberSuite } from "./one_member.js";

const suite = oneMemberSuite();

interface Kv {
  key: Buffer;
  value: Buffer;
  create_revision: string;
  mod_revision: string;
  version: string;
  lease: string;
}
interface WatchResponse {
  header: { revision: string };
  created: boolean;
  events: { type: "PUT" | "DELETE"; kv: Kv }[];
}
interface Header {
  header: { revision: string };
}

/** One revision as etcd's bbolt holds it. */
interface Row {
  main: bigint;
  sub: bigint;
  tombstone: boolean;
  key: Buffer;
  bytes: Buffer;
}

/** CRC-32C: the project's (a wrong one would fail the same oracle against real etcd). */
function crc32c(parts: readonly Buffer[]): number {
  const h = new Crc32c();
  for (const p of parts) h.update(p);
  return h.digest();
}

function varint(n: bigint): number[] {
  let u = BigInt.asUintN(64, n);
  const out: number[] = [];
  while (u >= 0x80n) {
    out.push(Number(u & 0x7fn) | 0x80);
    u >>= 7n;
  }
  out.push(Number(u));
  return out;
}

/** mvccpb.KeyValue as gogoproto marshals it: fields in number order, zero values left out. */
function marshalKv(key: Buffer, create: bigint, mod: bigint, version: bigint, value: Buffer, lease: bigint): Buffer {
  const out: number[] = [];
  const bytes = (tag: number, b: Buffer) => b.length > 0 && out.push(tag, ...varint(BigInt(b.length)), ...b);
  const int = (tag: number, n: bigint) => n !== 0n && out.push(tag, ...varint(n));
  bytes(0x0a, key);
  int(0x10, create);
  int(0x18, mod);
  int(0x20, version);
  bytes(0x2a, value);
  int(0x30, lease);
  return Buffer.from(out);
}

function revisionKey(r: Row): Buffer {
  const b = Buffer.alloc(r.tombstone ? 18 : 17);
  b.writeBigInt64BE(r.main, 0);
  b[8] = 0x5f;
  b.writeBigInt64BE(r.sub, 9);
  if (r.tombstone) b[17] = 0x74;
  return b;
}

/** The revisions in the watch's events, in order, each numbered within its main revision. */
function rowsOf(events: WatchResponse["events"]): Row[] {
  const rows: Row[] = [];
  for (const ev of events) {
    const main = BigInt(ev.kv.mod_revision);
    const last = rows.at(-1);
    const sub = last !== undefined && last.main === main ? last.sub + 1n : 0n;
    const tombstone = ev.type === "DELETE";
    const kv = ev.kv;
    const bytes = tombstone
      ? marshalKv(kv.key, 0n, 0n, 0n, Buffer.alloc(0), 0n)
      : marshalKv(kv.key, BigInt(kv.create_revision), main, BigInt(kv.version), kv.value, BigInt(kv.lease));
    rows.push({ main, sub, tombstone, key: kv.key, bytes });
  }
  return rows;
}

/** etcd's keyIndex.keep(at) over every key: the latest revision ≤ at of each key, unless a tombstone. */
function keep(rows: readonly Row[], at: bigint): Set<Row> {
  const latest = new Map<string, Row>();
  for (const r of rows) if (r.main <= at) latest.set(r.key.toString("latin1"), r);
  return new Set([...latest.values()].filter((r) => !r.tombstone));
}

/**
 * etcd's HashKV at `at` over the rows its bbolt holds after a compaction at `compactRev` (-1:
 * none): those at or below it are what the compaction kept, Keep(compactRev).
 */
function expectedHash(rows: readonly Row[], at: bigint, compactRev: bigint): number {
  const held = compactRev < 0n ? rows : rows.filter((r) => r.main > compactRev || keep(rows, compactRev).has(r));
  const keepAt = keep(held, at);
  const parts: Buffer[] = [Buffer.from("key")];
  for (const r of held) {
    if (r.main > at) continue;
    if (r.main <= compactRev && keepAt.size > 0 && !keepAt.has(r)) continue;
    parts.push(revisionKey(r), r.bytes);
  }
  return crc32c(parts);
}

/** Every event from revision `from` to `through`, from one Watch over every key. */
async function watchEvents(from: bigint, through: bigint): Promise<WatchResponse["events"]> {
  const stream = (suite.c.watch as unknown as { Watch(): grpc.ClientDuplexStream<object, WatchResponse> }).Watch();
  const events: WatchResponse["events"] = [];
  try {
    await new Promise<void>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`watch did not reach revision ${through}: ${events.length} events`)), 10_000);
      stream.on("error", reject);
      stream.on("data", (res: WatchResponse) => {
        events.push(...res.events);
        if (events.length > 0 && BigInt(events.at(-1)!.kv.mod_revision) >= through) {
          clearTimeout(timer);
          resolve();
        }
      });
      stream.write({ create_request: { key: Buffer.from([0]), range_end: Buffer.from([0]), start_revision: String(from) } });
    });
  } finally {
    stream.cancel();
  }
  return events;
}

async function hashKv(revision: bigint): Promise<{ hash: number; compact_revision: string }> {
  return unary(suite.c.maintenance, "HashKV", { revision: String(revision) });
}

const put = (key: string | Buffer, value: string | Buffer, lease = "0") =>
  unary<Header>(suite.c.kv, "Put", { key: Buffer.from(key), value: Buffer.from(value), lease });

describe("HashKV is etcd's hash", () => {
  it("at every revision, before and after a compaction, and with every key deleted", async () => {
    // Leases with ids chosen here (a server-chosen one differs between targets): small, past 2^53, past 2^62.
    const leases = ["5", "9007199254740993", "4611686018427387907"];
    for (const ID of leases) await unary(suite.c.lease, "LeaseGrant", { TTL: "3600", ID });
    await put("a", "1");
    await put("b", "2", leases[0]);
    // One revision of three changes (sub revisions 0..2): a put with an empty value, a put, a delete.
    await unary(suite.c.kv, "Txn", {
      compare: [],
      success: [
        { request_put: { key: Buffer.from("c"), value: Buffer.alloc(0) } },
        { request_put: { key: Buffer.from("d"), value: Buffer.from("4"), lease: leases[1] } },
        { request_delete_range: { key: Buffer.from("a") } },
      ],
      failure: [],
    });
    await put("b", "22");
    await put(Buffer.from([0, 0xff, 0x80]), Buffer.alloc(300, 0x61), leases[2]);
    // A range delete: one revision, two tombstones.
    await unary(suite.c.kv, "DeleteRange", { key: Buffer.from("c"), range_end: Buffer.from("e") });
    await put("a", "again");
    const last = BigInt((await put("e", "5")).header.revision);

    const events = await watchEvents(1n, last);
    const rows = rowsOf(events);
    expect(rows.filter((r) => r.tombstone)).toHaveLength(3);
    for (let rev = 1n; rev <= last; rev++) {
      expect((await hashKv(rev)).hash, `HashKV at ${rev}`).toBe(expectedHash(rows, rev, -1n));
    }
    expect((await hashKv(0n)).hash).toBe(expectedHash(rows, last, -1n));

    // Compacted in the middle (physically, so the store holds what the compaction left).
    const compactRev = 5n;
    await unary(suite.c.kv, "Compact", { revision: String(compactRev), physical: true });
    for (let rev = compactRev + 1n; rev <= last; rev++) {
      const got = await hashKv(rev);
      expect(got.compact_revision).toBe(String(compactRev));
      expect(got.hash, `HashKV at ${rev} after the compaction at ${compactRev}`).toBe(expectedHash(rows, rev, compactRev));
    }

    // Every key deleted after the compaction: Keep(rev) is empty, and etcd then hashes every row
    // its compaction left at or below it.
    const gone = BigInt((await unary<Header>(suite.c.kv, "DeleteRange", { key: Buffer.from([0]), range_end: Buffer.from([0]) })).header.revision);
    const all = rowsOf([...events, ...(await watchEvents(last + 1n, gone))]);
    expect((await hashKv(0n)).hash).toBe(expectedHash(all, gone, compactRev));
    expect((await hashKv(gone - 1n)).hash).toBe(expectedHash(all, gone - 1n, compactRev));
  });
});
