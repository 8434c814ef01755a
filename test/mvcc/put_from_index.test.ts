/**
 * A put takes its key's create revision and version from the index and the lease it replaces
 * from the store's lease map, never from the live row (issue 18). These check that what a put
 * writes is what reading the row would have given: across generations (delete, put again), in a
 * txn, after a compaction, after the store is reopened from disk (index and lease map rebuilt from
 * rows), and with rows long evicted from the row cache; and that the replaced lease is detached.
 */
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { KvStore } from '../../src/mvcc/kvstore.js';
import { b, FakeLessor, openStore, tmpDir } from './helpers.js';


const dirs: string[] = [];
const open: KvStore[] = [];
afterEach(() => {
  for (const st of open.splice(0)) st.close();
  for (const d of dirs.splice(0)) fs.rmSync(d, { recursive: true, force: true });
});

function store(dir: string, lessor: FakeLessor): KvStore {
  const st = openStore(dir, { leases: lessor });
  open.push(st);
  return st;
}

function meta(st: KvStore, key: string): [number, number, number, number | bigint] | undefined {
  const kv = st.range({ key: b(key) }).kvs[0];
  return kv === undefined ? undefined : [kv.createRevision, kv.modRevision, kv.version, kv.lease];
}

describe('put metadata from the index', () => {
  it('create revision and version across generations, txns and a compaction', () => {
    const dir = tmpDir();
    dirs.push(dir);
    const st = store(dir, new FakeLessor([]));
    st.put({ key: b('a'), value: b('1') }); // rev 2
    st.put({ key: b('a'), value: b('2') }); // rev 3
    expect(meta(st, 'a')).toEqual([2, 3, 2, 0]);
    st.deleteRange({ key: b('a') }); // rev 4
    st.put({ key: b('a'), value: b('3') }); // rev 5: a new generation
    expect(meta(st, 'a')).toEqual([5, 5, 1, 0]);
    st.txn({ success: [{ requestPut: { key: b('a'), value: b('4') } }, { requestPut: { key: b('b'), value: b('1') } }] }); // rev 6
    expect(meta(st, 'a')).toEqual([5, 6, 2, 0]);
    expect(meta(st, 'b')).toEqual([6, 6, 1, 0]);
    void st.compact(6);
    st.put({ key: b('a'), value: b('5') }); // rev 7
    expect(meta(st, 'a')).toEqual([5, 7, 3, 0]);
  });

  it('after a reopen, and for rows long out of the row cache', () => {
    const dir = tmpDir();
    dirs.push(dir);
    let st = store(dir, new FakeLessor([]));
    st.put({ key: b('k'), value: b('x') }); // rev 2
    st.put({ key: b('k'), value: b('y') }); // rev 3
    st.deleteRange({ key: b('k') }); // rev 4
    st.put({ key: b('k'), value: b('z') }); // rev 5
    st.put({ key: b('k'), value: b('w') }); // rev 6
    st.close();
    open.splice(open.indexOf(st), 1);
    st = store(dir, new FakeLessor([]));
    st.put({ key: b('k'), value: b('v') }); // rev 7: index rebuilt from rows
    expect(meta(st, 'k')).toEqual([5, 7, 3, 0]);
    // 20 MB of other rows push k's row out of the 8 MiB cache; its metadata still comes out right.
    const big = Buffer.alloc(64 * 1024, 1);
    for (let i = 0; i < 320; i++) st.put({ key: b(`pad${i}`), value: big });
    st.put({ key: b('k'), value: b('u') });
    expect(meta(st, 'k')).toEqual([5, 328, 4, 0]);
  });

  it('the replaced lease is detached, also after a reopen rebuilt the lease map', () => {
    const dir = tmpDir();
    dirs.push(dir);
    let lessor = new FakeLessor([7, 8]);
    let st = store(dir, lessor);
    st.put({ key: b('a'), value: b('1'), lease: 7 });
    st.put({ key: b('a'), value: b('2'), lease: 8 });
    st.put({ key: b('b'), value: b('1'), lease: 7 });
    expect(lessor.calls).toEqual(['attach 7 a', 'detach 7 a', 'attach 8 a', 'attach 7 b']);
    expect([...lessor.leases.get(7)!]).toEqual(['b']);
    st.close();
    open.splice(open.indexOf(st), 1);
    lessor = new FakeLessor([7, 8]);
    st = store(dir, lessor);
    expect(lessor.calls.sort()).toEqual(['attach 7 b', 'attach 8 a']);
    lessor.calls.length = 0;
    st.put({ key: b('a'), value: b('3') }); // no lease now: 8 lets go of a
    st.put({ key: b('b'), value: b('2'), lease: 8 }); // 7 lets go of b, 8 takes it
    st.put({ key: b('a'), value: b('4') }); // no lease before or after: nothing to detach
    expect(lessor.calls).toEqual(['detach 8 a', 'detach 7 b', 'attach 8 b']);
    expect(meta(st, 'a')?.[3]).toBe(0);
    expect(meta(st, 'b')?.[2]).toBe(2);
    st.deleteRange({ key: b('b') });
    expect(lessor.calls.at(-1)).toBe('detach 8 b');
    st.put({ key: b('b'), value: b('3') }); // a new generation without a lease: nothing to detach
    expect(lessor.calls.at(-1)).toBe('detach 8 b');
  });
});
