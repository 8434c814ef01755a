/**
 * The store with the real lessor plugged in through LeaseHooks, the shared
 * SQLite handle and deleteKeys: revoke deletes keys in one revision, and
 * leases, attachments and the consistent index survive restarts together.
 */
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import { Lessor } from '../../src/lease/lessor.js';
import type { KvStore } from '../../src/mvcc/kvstore.js';
import { b, openStore, tmpDir } from './helpers.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0).reverse()) f();
});

function boot(dir: string, opts = {}): { kv: KvStore; lessor: Lessor } {
  const kv = openStore(dir, opts);
  const lessor = new Lessor({ db: kv.db, now: () => 0, noteWrites: (n) => kv.noteWrites(n), rangeDeleter: kv });
  kv.setLeaseHooks(lessor);
  kv.onRestore(() => lessor.recover(kv.db));
  return { kv, lessor };
}

describe('kv store + lessor', () => {
  it('revoke deletes every attached key in one revision; state survives a restart', () => {
    const dir = tmpDir();
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    let { kv, lessor } = boot(dir);
    expect(kv.markApplied(1, 1)).toBe(true);
    lessor.grant(100, 60);
    kv.apply(2, 1, { put: { key: b('a'), value: b('1'), lease: 100 } });
    kv.apply(3, 1, { put: { key: b('b'), value: b('1'), lease: 100 } });
    kv.apply(4, 1, { put: { key: b('c'), value: b('1') } });
    expect(lessor.timeToLive(100, { keys: true }).keys.map((k) => Buffer.from(k).toString())).toEqual(['a', 'b']);
    kv.close();

    ({ kv, lessor } = boot(dir));
    expect(kv.consistentIndex()).toBe(4);
    expect(lessor.timeToLive(100, { keys: true }).keys.map((k) => Buffer.from(k).toString())).toEqual(['a', 'b']);
    const rev = kv.currentRevision();
    expect(kv.markApplied(5, 1)).toBe(true);
    lessor.revoke(100);
    expect(kv.currentRevision()).toBe(rev + 1);
    expect(kv.range({ key: b('a'), rangeEnd: b('z') }).kvs.map((x) => Buffer.from(x.key).toString())).toEqual(['c']);
    expect(kv.apply(6, 1, { put: { key: b('d'), value: b(''), lease: 100 } })!.error?.message).toBe('etcdserver: requested lease not found');
    kv.close();
    ({ kv, lessor } = boot(dir));
    expect(lessor.timeToLive(100).ttlSec).toBe(-1);
    kv.close();
  });

  it('lease ids over the whole int64 range are stored exactly: range, txn compare, restart and revoke', () => {
    const dir = tmpDir();
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    let { kv, lessor } = boot(dir);
    const big = 2n ** 53n + 1n; // a double would round it to 2^53
    const max = 2n ** 63n - 1n;
    lessor.grant(big, 60);
    lessor.grant(max, 60);
    lessor.grant(-(2n ** 63n), 60);
    kv.apply(1, 1, { put: { key: b('big'), value: b('1'), lease: big } });
    kv.apply(2, 1, { put: { key: b('max'), value: b('1'), lease: max } });
    kv.apply(3, 1, { put: { key: b('min'), value: b('1'), lease: -(2n ** 63n) } });
    kv.apply(4, 1, { put: { key: b('small'), value: b('1'), lease: 0 } });
    // 2^53 itself is another lease: unknown.
    expect(kv.apply(5, 1, { put: { key: b('x'), value: b(''), lease: 2n ** 53n } })!.error?.message).toBe('etcdserver: requested lease not found');
    const leases = (): unknown[] => kv.range({ key: b('a'), rangeEnd: b('z') }).kvs.map((x) => [Buffer.from(x.key).toString(), x.lease]);
    expect(leases()).toEqual([['big', big], ['max', max], ['min', -(2n ** 63n)], ['small', 0]]);
    const cmp = kv.apply(6, 1, { txn: { compare: [{ key: b('big'), target: 4, result: 0, lease: big }], success: [{ requestPut: { key: b('cmp'), value: b('y') } }] } });
    expect(cmp!.error).toBeUndefined();
    kv.close();

    ({ kv, lessor } = boot(dir));
    expect(leases()).toEqual([['big', big], ['cmp', 0], ['max', max], ['min', -(2n ** 63n)], ['small', 0]]);
    expect(lessor.timeToLive(max, { keys: true }).keys.map((k) => Buffer.from(k).toString())).toEqual(['max']);
    kv.markApplied(7, 1);
    lessor.revoke(big);
    expect(leases()).toEqual([['cmp', 0], ['max', max], ['min', -(2n ** 63n)], ['small', 0]]);
    kv.close();
  });

  it('a crash loses a lease grant and the puts using it together with the consistent index', () => {
    const dir = tmpDir();
    cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }));
    const opts = { batchIntervalMs: 3_600_000, batchLimit: 1_000_000 };
    let { kv, lessor } = boot(dir, opts);
    kv.apply(1, 1, { put: { key: b('base'), value: b('') } });
    kv.backend.forceCommit();
    kv.markApplied(2, 1);
    lessor.grant(7, 60);
    kv.apply(3, 1, { put: { key: b('k'), value: b(''), lease: 7 } });
    kv.crashForTest();
    ({ kv, lessor } = boot(dir, opts));
    expect(kv.consistentIndex()).toBe(1);
    expect(lessor.timeToLive(7).ttlSec).toBe(-1);
    // Re-applying entries 2 and 3 rebuilds both.
    expect(kv.markApplied(2, 1)).toBe(true);
    lessor.grant(7, 60);
    expect(kv.apply(3, 1, { put: { key: b('k'), value: b(''), lease: 7 } })!.error).toBeUndefined();
    expect(lessor.timeToLive(7, { keys: true }).keys.length).toBe(1);
    kv.close();
  });
});
