/**
 * KeyValueBytes (src/mvcc/key_value_bytes.ts), the row as etcd's bbolt holds it, against the
 * project's protobuf codec encoding the same mvccpb.KeyValue (a second, independent encoder of
 * the same proto3 rules): random rows over every field's range (empty keys and values, revisions
 * past 2^32 and 2^53 - 1, lease ids negative, past 2^53, at both ends of int64), and tombstones as
 * their key alone. test/e2e/hashkv.test.ts checks the hash built from these against real etcd.
 */
import { describe, expect, it } from 'vitest';
import { loadEtcdCodecs } from '../../src/pb/protos.js';
import type { KeyValueInit } from '../../src/pb/etcd-types.js';
import { KeyValueBytes } from '../../src/mvcc/key_value_bytes.js';
import type { KvRow } from '../../src/mvcc/kv_backend.js';
import { revMain, packRev } from '../../src/mvcc/revision.js';
import { mulberry32 } from '../prng.js';
import { testSeed } from '../seed.js';

const codec = loadEtcdCodecs().message<unknown, KeyValueInit>('mvccpb.KeyValue');

function pick<T>(rnd: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rnd() * xs.length)]!;
}

function randomRow(rnd: () => number): KvRow {
  const bytes = () => {
    const b = Buffer.alloc(pick(rnd, [0, 1, 5, 127, 128, 300, 20_000]));
    for (let i = 0; i < b.length; i += 97) b[i] = Math.floor(rnd() * 256);
    return b;
  };
  const count = () => pick(rnd, [0, 1, 127, 128, 16_383, 16_384, 2 ** 31, 2 ** 32 + 5, 2 ** 40 + 3]);
  const lease = pick<number | bigint>(rnd, [0, 1, 5, -1, 2 ** 53 - 1, 2n ** 53n + 1n, 2n ** 63n - 1n, -(2n ** 63n), -7n]);
  return {
    rev: packRev(pick(rnd, [1, 2, 1000, 2047, 2048, 2 ** 30]), pick(rnd, [0, 1, 200])),
    key: bytes(),
    value: bytes(),
    createRev: count(),
    version: count(),
    lease,
    tombstone: rnd() < 0.2,
  };
}

function viaCodec(row: KvRow): Buffer {
  if (row.tombstone) return Buffer.from(codec.encode({ key: row.key }));
  return Buffer.from(
    codec.encode({ key: row.key, create_revision: row.createRev, mod_revision: revMain(row.rev), version: row.version, value: row.value, lease: row.lease }),
  );
}

describe('KeyValueBytes', () => {
  it('marshals a row as the protobuf codec does, and a tombstone as its key alone', () => {
    const rnd = mulberry32(testSeed('key_value_bytes'));
    const kv = new KeyValueBytes();
    let bytes = 0;
    for (let i = 0; i < 3000; i++) {
      const row = randomRow(rnd);
      const ours = kv.marshal(row);
      const theirs = viaCodec(row);
      if (!ours.equals(theirs)) {
        const what = JSON.stringify({ ...row, key: row.key.length, value: row.value.length, lease: String(row.lease) });
        expect(ours.toString('hex'), `row ${i}: ${what}`).toBe(theirs.toString('hex'));
      }
      bytes += ours.length;
    }
    // Every row was compared, most with fields of every kind.
    expect(bytes).toBeGreaterThan(3000 * 20);
  });

  it("writes a row's revision key as etcd's bbolt holds it, mains past 2^32 and tombstones too", () => {
    const rnd = mulberry32(testSeed('key_value_bytes.revisionKey'));
    const kv = new KeyValueBytes();
    for (let i = 0; i < 2000; i++) {
      const main = pick(rnd, [1, 255, 2 ** 31, 2 ** 32 - 1, 2 ** 32, 2 ** 33 - 1, Math.floor(rnd() * 2 ** 33)]);
      const sub = pick(rnd, [0, 1, 255, 2 ** 20 - 1]);
      const tombstone = rnd() < 0.5;
      const expected = Buffer.alloc(tombstone ? 18 : 17);
      expected.writeBigInt64BE(BigInt(main), 0);
      expected[8] = 0x5f;
      expected.writeBigInt64BE(BigInt(sub), 9);
      if (tombstone) expected[17] = 0x74;
      const row: KvRow = { rev: packRev(main, sub), key: Buffer.from('k'), value: Buffer.alloc(0), createRev: 1, version: 1, lease: 0, tombstone };
      expect(kv.revisionKey(row).toString('hex'), `main ${main} sub ${sub} tombstone ${tombstone}`).toBe(expected.toString('hex'));
    }
  });

  it('writes a negative lease as ten bytes of two\'s complement, as Go does', () => {
    const row: KvRow = { rev: packRev(3, 0), key: Buffer.from('k'), value: Buffer.alloc(0), createRev: 3, version: 1, lease: -1, tombstone: false };
    expect(new KeyValueBytes().marshal(row).toString('hex')).toBe('0a016b' + '1003' + '1803' + '2001' + '30ffffffffffffffffff01');
  });
});
