/**
 * A write's raft entry built from the client's own request bytes (encodeRaftRequestWith): for a
 * canonically encoded request it must be the codec's very bytes, with or without the auth header,
 * over a seeded run of puts, deletes and txns; bytes a client sent beyond the proto still decode
 * to the same request; and the proposal's size limit is the codec's, as etcd's.
 */
import { describe, expect, it } from "vitest";
import { loadMemberCodecs } from "../../src/pb/protos.js";
import type { DeleteRangeRequestInit, PutRequestInit, RequestHeaderInit, TxnRequestInit } from "../../src/pb/member-types.js";
import { IdGenerator } from "../../src/server/id_gen.js";
import { Proposals } from "../../src/server/proposals.js";
import {
  decodeRaftRequest,
  encodeRaftRequest,
  encodeRaftRequestWith,
  type ProposedRequest,
  RawRequestField,
  rawRequestMatches,
} from "../../src/server/raft_request.js";
import { mulberry32 } from "../prng.js";
import { testSeed } from "../seed.js";

const codecs = loadMemberCodecs();
const putCodec = codecs.message<unknown, PutRequestInit>("etcdserverpb.PutRequest");
const deleteCodec = codecs.message<unknown, DeleteRangeRequestInit>("etcdserverpb.DeleteRangeRequest");
const txnCodec = codecs.message<unknown, TxnRequestInit>("etcdserverpb.TxnRequest");

type Rnd = () => number;

function bytes(rnd: Rnd, max: number): Buffer {
  const b = Buffer.alloc(Math.floor(rnd() * (max + 1)));
  for (let i = 0; i < b.length; i++) b[i] = Math.floor(rnd() * 256);
  return b;
}

function int(rnd: Rnd, max: number): number {
  return Math.floor(rnd() * max);
}

function randomPut(rnd: Rnd): PutRequestInit {
  return {
    key: bytes(rnd, 24),
    value: bytes(rnd, rnd() < 0.1 ? 70_000 : 300),
    lease: rnd() < 0.5 ? 0 : rnd() < 0.5 ? int(rnd, 2 ** 31) : int(rnd, Number.MAX_SAFE_INTEGER),
    prevKv: rnd() < 0.5,
    ignoreValue: rnd() < 0.2,
    ignoreLease: rnd() < 0.2,
  };
}

function randomDelete(rnd: Rnd): DeleteRangeRequestInit {
  return { key: bytes(rnd, 16), rangeEnd: rnd() < 0.5 ? bytes(rnd, 16) : undefined, prevKv: rnd() < 0.5 };
}

function randomTxn(rnd: Rnd): TxnRequestInit {
  const ops = () => Array.from({ length: int(rnd, 3) }, () => (rnd() < 0.5 ? { requestPut: randomPut(rnd) } : { requestDeleteRange: randomDelete(rnd) }));
  const compare = Array.from({ length: int(rnd, 3) }, () => ({ result: int(rnd, 4), target: 0, key: bytes(rnd, 12), version: int(rnd, 1000) }));
  return { compare, success: ops(), failure: ops() };
}

function randomHeader(rnd: Rnd): RequestHeaderInit | undefined {
  if (rnd() < 0.5) return undefined;
  return { username: bytes(rnd, 10).toString("hex"), authRevision: int(rnd, 2 ** 40) };
}

/** One request of each kind as a client sends it: encoded, then decoded as the handler gets it. */
function sent(rnd: Rnd): { req: ProposedRequest; field: (typeof RawRequestField)[keyof typeof RawRequestField]; wire: Buffer } {
  const kind = int(rnd, 3);
  if (kind === 0) {
    const wire = Buffer.from(putCodec.encode(randomPut(rnd)));
    return { req: { put: putCodec.decode(wire) as PutRequestInit }, field: RawRequestField.put, wire };
  }
  if (kind === 1) {
    const wire = Buffer.from(deleteCodec.encode(randomDelete(rnd)));
    return { req: { deleteRange: deleteCodec.decode(wire) as DeleteRangeRequestInit }, field: RawRequestField.deleteRange, wire };
  }
  const wire = Buffer.from(txnCodec.encode(randomTxn(rnd)));
  return { req: { txn: txnCodec.decode(wire) as TxnRequestInit }, field: RawRequestField.txn, wire };
}

describe("encodeRaftRequestWith", () => {
  it("gives the codec's bytes for canonically encoded puts, deletes and txns, with and without a header", () => {
    const seed = testSeed("raft_request.splice");
    const rnd = mulberry32(seed);
    for (let i = 0; i < 2_000; i++) {
      const { req, field, wire } = sent(rnd);
      const header = randomHeader(rnd);
      // Ids: small, past 2^32 (a varint past the bit operators' reach), and etcd's member-prefixed ones near 2^53.
      const id = 1 + (i % 3 === 0 ? int(rnd, 1000) : i % 3 === 1 ? int(rnd, 2 ** 40) : int(rnd, Number.MAX_SAFE_INTEGER - 1));
      const spliced = encodeRaftRequestWith(id, { field, bytes: wire }, header);
      const encoded = encodeRaftRequest({ ID: id, ...req, ...(header === undefined ? {} : { header }) });
      expect(spliced.equals(encoded), `seed ${seed}, request ${i}`).toBe(true);
    }
  });

  it("carries fields the proto does not know as the client sent them, and the entry decodes to the request", () => {
    const put: PutRequestInit = { key: Buffer.from("k"), value: Buffer.from("v"), lease: 7, prevKv: true, ignoreValue: false, ignoreLease: false };
    const canonical = Buffer.from(putCodec.encode(put));
    // Field 99, wire type 2, three bytes: skipped by every decoder.
    const wire = Buffer.concat([canonical, Buffer.from([0x9a, 0x06, 3, 1, 2, 3])]);
    const entry = encodeRaftRequestWith(42, { field: RawRequestField.put, bytes: wire }, undefined);
    expect(entry.length).toBe(encodeRaftRequest({ ID: 42, put }).length + 6);
    const decoded = decodeRaftRequest(entry);
    expect(decoded.ID).toBe(42);
    expect(decoded.put).toEqual(putCodec.decode(canonical));
  });

  it("refuses a bad id", () => {
    const wire = Buffer.from(putCodec.encode({ key: Buffer.from("k") }));
    for (const id of [0, -1, 1.5, Number.MAX_SAFE_INTEGER + 1]) {
      expect(() => encodeRaftRequestWith(id, { field: RawRequestField.put, bytes: wire }, undefined)).toThrow(/bad id/);
    }
  });
});

describe("rawRequestMatches", () => {
  it("holds only for the request in the field the bytes fill, with or without a header", () => {
    const put = { key: Buffer.from("k") };
    expect(rawRequestMatches({ put }, { field: RawRequestField.put, bytes: Buffer.alloc(0) })).toBe(true);
    expect(rawRequestMatches({ put, header: { username: "u" } }, { field: RawRequestField.put, bytes: Buffer.alloc(0) })).toBe(true);
    expect(rawRequestMatches({ put }, { field: RawRequestField.txn, bytes: Buffer.alloc(0) })).toBe(false);
    expect(rawRequestMatches({ put, deleteRange: { key: Buffer.from("k") } }, { field: RawRequestField.put, bytes: Buffer.alloc(0) })).toBe(false);
    expect(rawRequestMatches({ leaseRevoke: { ID: 1 } }, { field: RawRequestField.put, bytes: Buffer.alloc(0) })).toBe(false);
    expect(rawRequestMatches({ header: { username: "u" } }, { field: RawRequestField.put, bytes: Buffer.alloc(0) })).toBe(false);
  });
});

describe("a proposal with the client's bytes", () => {
  function proposals(maxRequestBytes: number) {
    const entries: Uint8Array[] = [];
    const p = new Proposals({
      ids: new IdGenerator(1n, 0),
      maxRequestBytes,
      requestTimeoutMs: 1000,
      now: () => 0,
      state: { committedIndex: () => 0, appliedIndex: () => 0, hasLeader: () => true },
      wake: () => {},
      failed: { inc: () => {} },
    });
    const raft = { proposeBatch: (data: Uint8Array[]) => entries.push(...data), proposeConfChange: () => {} };
    return { p, entries, flush: () => p.flush(raft) };
  }

  it("proposes the client's bytes, and is held to --max-request-bytes as the codec encodes it", async () => {
    const put: PutRequestInit = { key: Buffer.from("key"), value: Buffer.alloc(40, 1) };
    const canonical = Buffer.from(putCodec.encode(put));
    const unknown = Buffer.from([0x9a, 0x06, 20, ...Buffer.alloc(20, 9)]);
    const wire = Buffer.concat([canonical, unknown]);
    const limit = encodeRaftRequest({ ID: 2 ** 40, put }).length + 2;
    const { p, entries, flush } = proposals(limit);
    // Over the limit only with the unknown field: accepted, proposed as the codec encodes it.
    void p.propose({ put: putCodec.decode(wire) as PutRequestInit }, undefined, { field: RawRequestField.put, bytes: wire });
    // Within the limit with it: proposed as the client sent it.
    const small = Buffer.concat([Buffer.from(putCodec.encode({ key: Buffer.from("k") })), Buffer.from([0x9a, 0x06, 2, 9, 9])]);
    void p.propose({ put: putCodec.decode(small) as PutRequestInit }, undefined, { field: RawRequestField.put, bytes: small });
    flush();
    expect(entries).toHaveLength(2);
    const first = Buffer.from(entries[0]!);
    expect(first.equals(encodeRaftRequest({ ID: decodeRaftRequest(first).ID, put: putCodec.decode(canonical) as PutRequestInit }))).toBe(true);
    expect(Buffer.from(entries[1]!).includes(small)).toBe(true);
    // Over the limit either way: refused with etcd's error.
    const big = Buffer.from(putCodec.encode({ key: Buffer.from("key"), value: Buffer.alloc(limit, 1) }));
    await expect(p.propose({ put: putCodec.decode(big) as PutRequestInit }, undefined, { field: RawRequestField.put, bytes: big })).rejects.toThrow("etcdserver: request is too large");
  });

  it("refuses bytes that do not go with the request", async () => {
    const { p } = proposals(1024);
    const wire = Buffer.from(putCodec.encode({ key: Buffer.from("k") }));
    await expect(p.propose({ deleteRange: { key: Buffer.from("k") } }, undefined, { field: RawRequestField.put, bytes: wire })).rejects.toThrow(/do not go with/);
  });
});
