/** etcd behaviours the property test does not reach: errors and codes, duplicate keys, leases, deleteKeys, apply idempotence, hashes, snapshot, defrag. */
import fs from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { Status } from '../../src/grpc/status.js';
import { ErrCompacted, ErrDuplicateKey, ErrEmptyKey, ErrFutureRev, ErrLeaseNotFound } from '../../src/mvcc/errors.js';
import { toEtcdError } from '../../src/server/errors.js';
import type { KvStore } from '../../src/mvcc/kvstore.js';
import { type CompareTarget, type Event, EventType } from '../../src/mvcc/types.js';
import { packRev } from '../../src/mvcc/revision.js';
import { checkTxnRequest, ErrTooManyOps } from '../../src/mvcc/txn_check.js';
import { b, FakeLessor, openStore, s, tmpDir } from './helpers.js';

const dirs: string[] = [];
const stores: KvStore[] = [];
function fresh(opts = {}): KvStore {
  const dir = tmpDir();
  dirs.push(dir);
  const st = openStore(dir, opts);
  stores.push(st);
  return st;
}
afterEach(() => {
  for (const st of stores.splice(0)) st.close();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});


describe('kv store', () => {
  it('starts at revision 1; each modifying request is one revision; no-op deletes and read-only txns are not', () => {
    const st = fresh();
    expect(st.currentRevision()).toBe(1);
    st.put({ key: b('a'), value: b('1') });
    expect(st.currentRevision()).toBe(2);
    expect(st.deleteRange({ key: b('zzz') }).deleted).toBe(0);
    expect(st.currentRevision()).toBe(2);
    st.txn({ success: [{ requestRange: { key: b('a') } }] });
    expect(st.currentRevision()).toBe(2);
    const t = st.txn({ success: [{ requestPut: { key: b('x'), value: b('1') } }, { requestPut: { key: b('y'), value: b('2') } }] });
    expect(t.succeeded).toBe(true);
    expect(st.currentRevision()).toBe(3);
    const r = st.range({ key: b('x'), rangeEnd: b('z') });
    expect(r.kvs.map((kv) => kv.modRevision)).toEqual([3, 3]);
  });

  it('a row read back from the cache holds only its own bytes, not the buffer its key and value were views into', () => {
    const st = fresh();
    // Applied requests are decoded from a raft entry whose buffer is sized by the encoder's hint
    // (up to 64 KiB): key and value arrive as small views into it.
    const entry = Buffer.alloc(8192, 7);
    entry.write('k1', 100);
    st.put({ key: entry.subarray(100, 102), value: entry.subarray(200, 210) });
    const kv = st.range({ key: b('k1') }).kvs[0]!;
    expect([s(kv.key), [...kv.value]]).toEqual(['k1', new Array(10).fill(7)]);
    const row = st.backend.getKv(packRev(kv.modRevision, 0))!;
    expect(row.key.buffer.byteLength + row.value.buffer.byteLength).toBeLessThanOrEqual(2 * (2 + 10));
    // Rows that own their bytes are cached as they are.
    st.put({ key: b('k2'), value: Buffer.alloc(0) });
    expect(st.backend.getKv(packRev(st.currentRevision(), 0))!.value.byteLength).toBe(0);
  });

  it('large ranges come back complete and in key order (multi-row fetch)', () => {
    const st = fresh();
    const keys = Array.from({ length: 300 }, (_, i) => `k${String((i * 7919) % 300).padStart(3, '0')}`);
    for (const k of keys) st.put({ key: b(k), value: b(`v-${k}`) });
    for (const k of keys.slice(0, 100)) st.put({ key: b(k), value: b(`w-${k}`) });
    const r = st.range({ key: b('k'), rangeEnd: b('l') });
    expect(r.count).toBe(300);
    const sorted = [...keys].sort();
    expect(r.kvs.map((kv) => s(kv.key))).toEqual(sorted);
    const rewritten = new Set(keys.slice(0, 100));
    expect(r.kvs.every((kv) => s(kv.value) === `${rewritten.has(s(kv.key)) ? 'w' : 'v'}-${s(kv.key)}`)).toBe(true);
    const old = st.range({ key: b('k'), rangeEnd: b('l'), revision: 301 });
    expect(old.kvs.every((kv) => s(kv.value).startsWith('v-'))).toBe(true);
  });

  it('reports compacted and future revisions with etcd messages and gRPC codes', () => {
    const st = fresh();
    for (let i = 0; i < 5; i++) st.put({ key: b('k'), value: b(String(i)) });
    void st.compact(4);
    const compacted = (() => {
      try {
        st.range({ key: b('k'), revision: 3 });
      } catch (e) {
        return e;
      }
    })();
    expect(compacted).toBeInstanceOf(ErrCompacted);
    expect((compacted as ErrCompacted).message).toBe('etcdserver: mvcc: required revision has been compacted');
    expect(toEtcdError(compacted).code).toBe(Status.OUT_OF_RANGE);
    expect(st.range({ key: b('k'), revision: 4 }).kvs[0]!.modRevision).toBe(4);
    expect(() => st.range({ key: b('k'), revision: 7 })).toThrow(ErrFutureRev);
    expect(new ErrFutureRev().message).toBe('etcdserver: mvcc: required revision is a future revision');
    expect(() => st.compact(4)).toThrow(ErrCompacted);
    expect(() => st.compact(99)).toThrow(ErrFutureRev);
  });

  it("checks empty keys and op counts through every nested txn before duplicates, as etcd's kvServer.Txn", () => {
    const put = (k: string) => ({ requestPut: { key: b(k), value: b('v') } });
    const range = (k: string) => ({ requestRange: { key: b(k) } });
    // A duplicate in a nested txn's branch, an empty key in the parent's later op: etcd answers the empty key
    // (its checkTxnRequest recurses first; checkIntervals runs once, from the top). Found by the rpc_fields fuzz.
    const dupThenEmpty = { success: [{ requestTxn: { success: [put('k'), put('k')] } }, range('')] };
    expect(() => checkTxnRequest(dupThenEmpty)).toThrow(ErrEmptyKey);
    // A nested txn may use only what its parent's widest branch leaves of --max-txn-ops.
    const ops = (n: number) => Array.from({ length: n }, (_, i) => range(`r${i}`));
    expect(() => checkTxnRequest({ success: [...ops(5), { requestTxn: { success: ops(4) } }] }, 10)).not.toThrow();
    expect(() => checkTxnRequest({ success: [...ops(5), { requestTxn: { success: ops(5) } }] }, 10)).toThrow(ErrTooManyOps);
  });

  it('rejects a key written twice in one txn, as etcd checkIntervals does', () => {
    const put = (k: string) => ({ requestPut: { key: b(k), value: b('v') } });
    const del = (k: string, e?: string) => ({ requestDeleteRange: { key: b(k), rangeEnd: e === undefined ? undefined : b(e) } });
    expect(() => checkTxnRequest({ success: [put('a'), put('a')] })).toThrow(ErrDuplicateKey);
    expect(() => checkTxnRequest({ success: [del('a', 'c'), put('b')] })).toThrow(ErrDuplicateKey);
    expect(() => checkTxnRequest({ success: [put('a'), { requestTxn: { success: [put('a')] } }] })).toThrow(ErrDuplicateKey);
    // then/else of a nested txn exclude each other; overlapping deletes are fine; branches are checked separately.
    expect(() => checkTxnRequest({ success: [{ requestTxn: { success: [put('a')], failure: [put('a')] } }] })).not.toThrow();
    expect(() => checkTxnRequest({ success: [del('a', 'c'), del('b', 'd')] })).not.toThrow();
    expect(() => checkTxnRequest({ success: [put('a')], failure: [put('a')] })).not.toThrow();
    expect(toEtcdError(new ErrDuplicateKey()).code).toBe(Status.INVALID_ARGUMENT);
    const st = fresh();
    const res = st.apply(1, 1, { txn: { success: [put('a'), put('a')] } });
    expect(res?.error).toBeInstanceOf(ErrDuplicateKey);
    expect(st.currentRevision()).toBe(1);
  });

  it('a compare with an undefined target compares 0 with 0 under its operator, as etcd 3.4 (checked with etcd 3.4.23)', () => {
    const st = fresh();
    st.put({ key: b('a'), value: b('1') });
    const outcomes = [0, 1, 2, 3, 7].flatMap((result) =>
      ['a', 'nokey'].map((key) => st.txn({ compare: [{ key: b(key), target: 2147483647 as CompareTarget, result, version: 5 }], success: [], failure: [] }).succeeded),
    );
    // EQUAL holds, GREATER / LESS / NOT_EQUAL fail, an undefined operator holds; present or absent key alike.
    expect(outcomes).toEqual([true, true, false, false, false, false, false, false, true, true]);
  });

  it('nested txn compares see the state before the txn', () => {
    const st = fresh();
    st.put({ key: b('a'), value: b('1') });
    const r = st.txn({
      success: [
        { requestPut: { key: b('a'), value: b('2') } },
        { requestTxn: { compare: [{ key: b('a'), target: 3, result: 0, value: b('1') }], success: [{ requestRange: { key: b('a') } }] } },
      ],
    });
    const nested = r.responses[1]!.responseTxn!;
    expect(nested.succeeded).toBe(true);
    // ...while ranges inside the txn see its own earlier writes.
    expect(s(nested.responses[0]!.responseRange!.kvs[0]!.value)).toBe('2');
  });

  it('checks, attaches and detaches leases through the hooks', () => {
    const lessor = new FakeLessor();
    lessor.leases.set(7, new Set());
    lessor.leases.set(8, new Set());
    const st = fresh({ leases: lessor });
    const err = st.apply(1, 1, { put: { key: b('a'), value: b('1'), lease: 9 } })!.error;
    expect(err).toBeInstanceOf(ErrLeaseNotFound);
    expect(err!.message).toBe('etcdserver: requested lease not found');
    expect(toEtcdError(err).code).toBe(Status.NOT_FOUND);
    expect(st.currentRevision()).toBe(1);
    st.put({ key: b('a'), value: b('1'), lease: 7 });
    st.put({ key: b('a'), value: b('2'), ignoreLease: true });
    expect(st.range({ key: b('a') }).kvs[0]!.lease).toBe(7);
    st.put({ key: b('a'), value: b('3'), lease: 8 });
    st.deleteRange({ key: b('a') });
    expect(lessor.calls).toEqual(['attach 7 a', 'detach 7 a', 'attach 7 a', 'detach 7 a', 'attach 8 a', 'detach 8 a']);
    // A txn whose put names an unknown lease fails as a whole.
    const t = st.apply(2, 1, { txn: { success: [{ requestPut: { key: b('x'), value: b('') } }, { requestPut: { key: b('y'), value: b(''), lease: 99 } }] } });
    expect(t!.error).toBeInstanceOf(ErrLeaseNotFound);
    expect(st.range({ key: b('x') }).count).toBe(0);
  });

  it('deleteKeys removes a set of keys in one revision, in key order, detaching leases', () => {
    const lessor = new FakeLessor();
    lessor.leases.set(5, new Set());
    const st = fresh({ leases: lessor });
    const seen: [number, Event[]][] = [];
    st.setObserver((rev, evs) => seen.push([rev, evs]));
    for (const k of ['c', 'a', 'b']) st.put({ key: b(k), value: b('v'), lease: 5 });
    const before = st.currentRevision();
    const res = st.deleteKeys([b('c'), b('a'), b('missing'), b('b')]);
    expect(res).toEqual({ deleted: 3, revision: before + 1 });
    const last = seen[seen.length - 1]!;
    expect(last[0]).toBe(before + 1);
    expect(last[1].map((e) => [e.type, s(e.kv.key), e.kv.modRevision])).toEqual([
      [EventType.DELETE, 'a', before + 1],
      [EventType.DELETE, 'b', before + 1],
      [EventType.DELETE, 'c', before + 1],
    ]);
    expect(lessor.leases.get(5)!.size).toBe(0);
  });

  it('re-attaches leased keys to the lessor after reopen and after a snapshot restore', async () => {
    const dir = tmpDir();
    dirs.push(dir);
    const lessor = new FakeLessor();
    lessor.leases.set(3, new Set());
    let st = openStore(dir, { leases: lessor });
    st.put({ key: b('a'), value: b('1'), lease: 3 });
    st.put({ key: b('b'), value: b('1'), lease: 3 });
    st.put({ key: b('b'), value: b('2') }); // b leaves the lease
    st.put({ key: b('c'), value: b('1'), lease: 3 });
    st.deleteRange({ key: b('c') });
    const file = path.join(dir, 'snap.db');
    await st.snapshot(file);
    st.close();
    const after = new FakeLessor();
    after.leases.set(3, new Set());
    st = openStore(dir);
    stores.push(st);
    st.setLeaseHooks(after);
    expect([...after.leases.get(3)!]).toEqual(['a']);
    const other = fresh();
    const third = new FakeLessor();
    third.leases.set(3, new Set());
    other.setLeaseHooks(third);
    other.onRestore(() => third.calls.push('recover'));
    other.restoreFromSnapshot(file);
    expect(third.calls).toEqual(['recover', 'attach 3 a']);
  });

  it('apply is idempotent at or below the consistent index; markApplied covers non-kv entries', () => {
    const st = fresh();
    expect(st.apply(1, 1, { put: { key: b('a'), value: b('1') } })?.revision).toBe(2);
    expect(st.apply(1, 1, { put: { key: b('a'), value: b('1') } })).toBeNull();
    expect(st.markApplied(2, 1)).toBe(true);
    expect(st.markApplied(2, 1)).toBe(false);
    expect(st.apply(2, 1, { put: { key: b('a'), value: b('2') } })).toBeNull();
    expect(st.consistentIndex()).toBe(2);
    expect(st.currentRevision()).toBe(2);
  });

  it('HashKV ignores compaction progress, and changes with the contents', async () => {
    const a = fresh({ compactionBatchKeys: 1 });
    const c = fresh({ compactionBatchKeys: 1 });
    for (const st of [a, c]) {
      for (let i = 0; i < 20; i++) st.put({ key: b(`k${i % 5}`), value: b(String(i)) });
      st.deleteRange({ key: b('k1') });
    }
    const h0 = a.hashKV(0).hash;
    expect(c.hashKV(0).hash).toBe(h0);
    void a.compact(15);
    void c.compact(15);
    await a.compactionDone(); // c has not run a single batch yet
    expect(a.hashKV(0)).toEqual(c.hashKV(0));
    expect(a.hashKV(18).hash).toBe(c.hashKV(18).hash);
    expect(await a.hashKVAsync(18, 3)).toEqual(c.hashKV(18));
    expect(await c.hashKVAsync(0, 4)).toEqual(a.hashKV(0));
    expect(() => a.hashKV(15)).toThrow(ErrCompacted);
    a.put({ key: b('k2'), value: b('x') });
    expect(a.hashKV(0).hash).not.toBe(c.hashKV(0).hash);
    expect(a.hash().hash).not.toBe(c.hash().hash);
  });

  it('snapshots the backend to one file and restores a store from it', async () => {
    const st = fresh();
    for (let i = 0; i < 50; i++) st.apply(i + 1, 2, { put: { key: b(`k${i}`), value: b(`v${i}`) } });
    const snapDir = tmpDir();
    dirs.push(snapDir);
    const file = path.join(snapDir, 'snap.db');
    const info = await st.snapshot(file);
    expect(info).toMatchObject({ consistentIndex: 50, term: 2, revision: 51 });
    // Writes after the snapshot started are not in it.
    st.apply(51, 2, { put: { key: b('late'), value: b('x') } });
    const other = fresh();
    other.put({ key: b('junk'), value: b('j') });
    other.restoreFromSnapshot(file);
    expect(other.consistentIndex()).toBe(50);
    expect(other.currentRevision()).toBe(51);
    expect(other.range({ key: b('k'), rangeEnd: b('l') }).count).toBe(50);
    expect(other.range({ key: b('junk') }).count).toBe(0);
    expect(other.range({ key: b('late') }).count).toBe(0);
    expect(other.hashKV(51).hash).toBe(st.hashKV(51).hash);
  });

  it('defragment reports the size before and after', async () => {
    const st = fresh({ compactionBatchKeys: 1000 });
    const big = Buffer.alloc(2000, 1);
    for (let i = 0; i < 500; i++) st.put({ key: b(`k${i}`), value: big });
    st.deleteRange({ key: b('k'), rangeEnd: b('l') });
    await st.compact(st.currentRevision());
    const r = st.defragment();
    expect(r.sizeBeforeBytes).toBeGreaterThan(1_000_000);
    expect(r.sizeAfterBytes).toBeLessThan(r.sizeBeforeBytes / 4);
    st.put({ key: b('after'), value: b('ok') });
    expect(st.range({ key: b('after') }).count).toBe(1);
  });
});
