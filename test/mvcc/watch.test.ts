/** Watch: ordering, atomic revisions, no gaps or duplicates, prev_kv, filters, compaction cancel, catch-up, slow watchers, progress. */
import fs from 'node:fs';
import { afterEach, describe, expect, it } from 'vitest';
import type { KvStore } from '../../src/mvcc/kvstore.js';
import { EventType, type WatchId, WatchFilterType } from '../../src/mvcc/types.js';
import { ErrWatcherDuplicateID } from '../../src/mvcc/errors.js';
import { WatchableStore } from '../../src/mvcc/watchable_store.js';
import type { WatchResponse } from '../../src/mvcc/watcher.js';
import type { WatchStream } from '../../src/mvcc/watch_stream.js';
import { b, macrotask, openStore, s, seedFor, tmpDir } from './helpers.js';
import { mulberry32 } from '../prng.js';

const cleanup: (() => void)[] = [];
afterEach(() => {
  for (const f of cleanup.splice(0).reverse()) f();
});

function setup(opts: ConstructorParameters<typeof WatchableStore>[1] = {}): { kv: KvStore; ws: WatchableStore } {
  const dir = tmpDir();
  const kv = openStore(dir, { compactionBatchKeys: 3 });
  const ws = new WatchableStore(kv, { syncIntervalMs: 5, ...opts });
  cleanup.push(() => fs.rmSync(dir, { recursive: true, force: true }));
  cleanup.push(() => kv.close());
  cleanup.push(() => ws.close());
  return { kv, ws };
}

interface Flat {
  rev: number;
  type: EventType;
  key: string;
  value: string;
}

/** Every event in the backend (no compaction in these tests), in revision order. */
function allEvents(kv: KvStore): Flat[] {
  const rows = kv.backend.rowsBetween(0, Number.MAX_SAFE_INTEGER, Number.MAX_SAFE_INTEGER);
  return rows.map((r) => ({
    rev: Math.floor(r.rev / 2 ** 20),
    type: r.tombstone ? EventType.DELETE : EventType.PUT,
    key: s(r.key),
    value: s(r.value),
  }));
}

async function drainUntil(stream: WatchStream, done: (rs: WatchResponse[]) => boolean, out: WatchResponse[] = []): Promise<WatchResponse[]> {
  let pending: Promise<WatchResponse | null> | null = null;
  for (let guard = 0; !done(out); guard++) {
    if (guard > 100_000) throw new Error('watch responses never completed');
    pending ??= stream.next();
    const r = await Promise.race([pending, new Promise<'tick'>((res) => setTimeout(() => res('tick'), 20))]);
    if (r === 'tick') continue;
    pending = null;
    if (r === null) break;
    out.push(r);
  }
  return out;
}

describe('watchable store', () => {
  it('random writes: every watcher sees exactly its events, in order, each revision in one response', async () => {
    const seed = seedFor('watch.random');
    const rand = mulberry32(seed);
    const { kv, ws } = setup({ syncRowsMax: 7, batchMaxRevs: 3 });
    const keys = ['a', 'b', 'c', 'd', 'e', 'f'];
    const pick = (): string => keys[Math.floor(rand() * keys.length)]!;
    const specs: { stream: WatchStream; id: WatchId; key: string; end?: string; start: number; got: WatchResponse[] }[] = [];
    let index = 0;
    const write = (): void => {
      const r = rand();
      if (r < 0.5) kv.apply(++index, 1, { put: { key: b(pick()), value: b(String(index)) } });
      else if (r < 0.7) kv.apply(++index, 1, { deleteRange: { key: b(pick()), rangeEnd: rand() < 0.5 ? b('g') : undefined } });
      else if (r < 0.9) {
        const k1 = pick();
        const k2 = keys.find((k) => k !== k1)!;
        kv.apply(++index, 1, { txn: { success: [{ requestPut: { key: b(k1), value: b('t') } }, { requestPut: { key: b(k2), value: b('t') } }, { requestDeleteRange: { key: b('f') } }] } });
      } else kv.deleteKeys([b(pick()), b(pick())]);
    };
    const consumers: Promise<void>[] = [];
    for (let round = 0; round < 12; round++) {
      for (let i = 0; i < 20; i++) write();
      // New watchers: past, present or future start; single key, range, or everything.
      const stream = ws.watchStream({ bufferMax: 1 + Math.floor(rand() * 4) });
      const shape = rand();
      const end = shape < 0.33 ? undefined : shape < 0.66 ? 'e' : '\0';
      const key = end === 'e' ? keys[Math.floor(rand() * 4)]! : pick();
      const cur = kv.currentRevision();
      const start = rand() < 0.2 ? 0 : 1 + Math.floor(rand() * (cur + 3));
      const id = stream.watch({ key: b(key), rangeEnd: end === undefined ? undefined : b(end), startRevision: start });
      const spec = { stream, id, key, end, start: start === 0 ? cur + 1 : start, got: [] as WatchResponse[] };
      specs.push(spec);
      // Consumers run slowly (a macrotask per response) so buffers fill and watchers get parked.
      consumers.push(
        (async () => {
          for (;;) {
            const r = await stream.next();
            if (r === null) return;
            spec.got.push(r);
            await macrotask();
          }
        })(),
      );
      await macrotask();
    }
    const finalRev = kv.currentRevision();
    // Let everyone catch up.
    for (let i = 0; i < 2000 && ws.unsyncedCount > 0; i++) await new Promise((r) => setTimeout(r, 2));
    await new Promise((r) => setTimeout(r, 50));
    expect(ws.unsyncedCount).toBe(0);
    const events = allEvents(kv);
    for (const sp of specs) {
      const inRange = (k: string): boolean => (sp.end === undefined ? k === sp.key : k >= sp.key && (sp.end === '\0' || k < sp.end));
      const want = events.filter((e) => e.rev >= sp.start && inRange(e.key));
      const got = sp.got.flatMap((r) => r.events.map((e) => ({ rev: e.kv.modRevision, type: e.type, key: s(e.kv.key), value: s(e.kv.value) })));
      if (JSON.stringify(got) !== JSON.stringify(want)) {
        console.log('MISMATCH', sp.key, sp.end, sp.start, JSON.stringify(sp.got.map((r) => r.events.map((e) => e.kv.modRevision))));
        console.log('WANT', JSON.stringify(want.map((e) => e.rev)));
      }
      expect(got, `watcher on ${sp.key}..${sp.end} from ${sp.start}`).toEqual(want);
      // A revision never spans two responses.
      const revsPerResponse = sp.got.map((r) => new Set(r.events.map((e) => e.kv.modRevision)));
      const seen = new Set<number>();
      for (const set of revsPerResponse) for (const rev of set) {
        expect(seen.has(rev), `revision ${rev} split across responses`).toBe(false);
        seen.add(rev);
      }
      expect(sp.got.every((r) => r.watchId === sp.id)).toBe(true);
    }
    expect(finalRev).toBe(kv.currentRevision());
    for (const sp of specs) sp.stream.close();
    await Promise.all(consumers);
  }, 60_000);

  it('prev_kv carries the previous version; creates have none', async () => {
    const { kv, ws } = setup();
    const st = ws.watchStream();
    st.watch({ key: b('a'), prevKv: true });
    kv.put({ key: b('a'), value: b('1') });
    kv.put({ key: b('a'), value: b('2') });
    kv.deleteRange({ key: b('a') });
    const rs = await drainUntil(st, (r) => r.length >= 3);
    expect(rs.map((r) => r.events[0]!.prevKv && s(r.events[0]!.prevKv.value))).toEqual([undefined, '1', '2']);
    expect(rs.map((r) => r.events[0]!.type)).toEqual([EventType.PUT, EventType.PUT, EventType.DELETE]);
    expect(rs[2]!.events[0]!.kv.modRevision).toBe(4);
  });

  it('NOPUT and NODELETE filters', async () => {
    const { kv, ws } = setup();
    const st = ws.watchStream();
    const noPut = st.watch({ key: b('a'), rangeEnd: b('z'), filters: [WatchFilterType.NOPUT] });
    const noDel = st.watch({ key: b('a'), rangeEnd: b('z'), filters: [WatchFilterType.NODELETE] });
    kv.put({ key: b('k'), value: b('1') });
    kv.deleteRange({ key: b('k') });
    kv.put({ key: b('m'), value: b('2') });
    const rs = await drainUntil(st, (r) => r.length >= 3);
    expect(rs.filter((r) => r.watchId === noPut).flatMap((r) => r.events.map((e) => e.type))).toEqual([EventType.DELETE]);
    expect(rs.filter((r) => r.watchId === noDel).flatMap((r) => r.events.map((e) => s(e.kv.key)))).toEqual(['k', 'm']);
  });


  it('client-chosen ids are exact int64s: above 2^53, the largest and negative ones key their watchers, duplicates are refused', async () => {
    const { kv, ws } = setup();
    const st = ws.watchStream();
    const above = 2n ** 53n + 1n;
    const max = 2n ** 63n - 1n;
    expect(st.watch({ key: b('a'), id: above })).toBe(above);
    // 2^53 is the double 2^53+1 would round to: another watcher, not a duplicate.
    expect(st.watch({ key: b('a'), id: 2n ** 53n })).toBe(2n ** 53n);
    expect(st.watch({ key: b('a'), id: max })).toBe(max);
    expect(st.watch({ key: b('a'), id: -(2n ** 63n) })).toBe(-(2n ** 63n));
    // A safe value given as a bigint is the number (one representation): 7n and 7 are the same id.
    expect(st.watch({ key: b('a'), id: 7n })).toBe(7);
    expect(() => st.watch({ key: b('a'), id: 7 })).toThrow(ErrWatcherDuplicateID);
    expect(() => st.watch({ key: b('a'), id: max })).toThrow(ErrWatcherDuplicateID);
    expect(() => st.watch({ key: b('a'), id: 2n ** 63n })).toThrow(TypeError);
    kv.put({ key: b('a'), value: b('1') });
    const rs = await drainUntil(st, (r) => r.length >= 5);
    expect(rs.map((r) => r.watchId).sort((x, y) => (x < y ? -1 : x > y ? 1 : 0))).toEqual([-(2n ** 63n), 7, 2n ** 53n, above, max]);
    expect(st.cancel(above)).toBe(true);
    expect(st.cancel(above)).toBe(false);
    expect(st.watcherIds()).toEqual([2n ** 53n, max, -(2n ** 63n), 7]);
  });
  it('a watcher starting below the compaction is canceled with compact_revision', async () => {
    const { kv, ws } = setup();
    for (let i = 0; i < 10; i++) kv.put({ key: b('k'), value: b(String(i)) });
    await kv.compact(6);
    const st = ws.watchStream();
    const id = st.watch({ key: b('k'), startRevision: 3 });
    const ok = st.watch({ key: b('k'), startRevision: 6 });
    const rs = await drainUntil(st, (r) => r.length >= 2);
    const canceled = rs.find((r) => r.watchId === id)!;
    expect(canceled).toEqual({ watchId: id, canceled: true, compactRevision: 6, events: [], revision: 0 });
    expect(rs.find((r) => r.watchId === ok)!.events.map((e) => e.kv.modRevision)).toEqual([6, 7, 8, 9, 10, 11]);
    // As in etcd's watchStream, the canceled watcher stays known to its stream until the client
    // cancels it (that cancel is answered); it gets nothing more.
    expect(st.watcherIds()).toEqual([id, ok]);
    expect(ws.compactedCount).toBe(1);
    kv.put({ key: b('k'), value: b('later') });
    const more = await drainUntil(st, (r) => r.length >= 1);
    expect(more.map((r) => r.watchId)).toEqual([ok]);
    expect(st.cancel(id)).toBe(true);
    expect(ws.compactedCount).toBe(0);
    expect(st.watcherIds()).toEqual([ok]);
  });

  /*
   * etcd 3.4 (checked with etcd 3.4.23): a negative start revision is a past revision below its
   * compactMainRev, which is -1 until the first compaction. So before any compaction: -1 keeps the
   * watcher with no history (its negative revision key sorts after every stored revision, the
   * catch-up read is empty) and it continues live; -2 and below are canceled with compact_revision
   * -1. After a compaction at C, every negative start is canceled with compact_revision C.
   */
  it('a negative start revision: -1 before any compaction watches live only; lower ones are canceled like compacted ones', async () => {
    const { kv, ws } = setup();
    for (let i = 0; i < 4; i++) kv.put({ key: b('k'), value: b(String(i)) });
    const st = ws.watchStream();
    const minusOne = st.watch({ key: b('k'), startRevision: -1 });
    const minusTwo = st.watch({ key: b('k'), startRevision: -2 });
    const canceled = await drainUntil(st, (r) => r.length >= 1);
    expect(canceled).toEqual([{ watchId: minusTwo, canceled: true, compactRevision: -1, events: [], revision: 0 }]);
    await macrotask();
    kv.put({ key: b('k'), value: b('live') });
    const live = kv.currentRevision();
    const rs = await drainUntil(st, (r) => r.length >= 1);
    expect(rs.map((r) => [r.watchId, r.events.map((e) => e.kv.modRevision)])).toEqual([[minusOne, [live]]]);
    expect(st.watcherIds()).toEqual([minusOne, minusTwo]);

    await kv.compact(3);
    const after = ws.watchStream();
    const id = after.watch({ key: b('k'), startRevision: -1 });
    expect(await drainUntil(after, (r) => r.length >= 1)).toEqual([{ watchId: id, canceled: true, compactRevision: 3, events: [], revision: 0 }]);
  });

  it('catches up from the past while writes continue', async () => {
    const { kv, ws } = setup({ syncRowsMax: 50 });
    for (let i = 0; i < 500; i++) kv.put({ key: b(`k${i % 10}`), value: b(String(i)) });
    const st = ws.watchStream();
    st.watch({ key: b('k'), rangeEnd: b('l'), startRevision: 2 });
    const got: WatchResponse[] = [];
    const consumer = drainUntil(st, (r) => r.length > 0 && r[r.length - 1]!.events.at(-1)!.kv.modRevision === 1501, got);
    for (let i = 500; i < 1500; i++) {
      kv.put({ key: b(`k${i % 10}`), value: b(String(i)) });
      if (i % 50 === 0) await macrotask();
    }
    await consumer;
    const revs = got.flatMap((r) => r.events.map((e) => e.kv.modRevision));
    expect(revs).toEqual(Array.from({ length: 1500 }, (_, i) => i + 2));
  });

  it('a slow watcher never blocks writes and its buffer stays bounded; it catches up later', async () => {
    const { kv, ws } = setup({ syncRowsMax: 200 });
    const slow = ws.watchStream({ bufferMax: 8 });
    slow.watch({ key: b('k'), rangeEnd: b('l') });
    const fast = ws.watchStream();
    fast.watch({ key: b('k'), rangeEnd: b('l') });
    const fastGot: WatchResponse[] = [];
    const fastDone = drainUntil(fast, (r) => r.length >= 3000, fastGot);
    let maxQueued = 0;
    for (let i = 0; i < 3000; i++) {
      kv.put({ key: b(`k${i % 7}`), value: b(String(i)) });
      maxQueued = Math.max(maxQueued, slow.queued);
      if (i % 100 === 0) await macrotask();
    }
    expect(kv.currentRevision()).toBe(3001); // every write applied while nobody read `slow`
    expect(maxQueued).toBeLessThanOrEqual(8);
    expect(ws.unsyncedCount).toBe(1); // parked
    await fastDone;
    const slowGot = await drainUntil(slow, (r) => r.flatMap((x) => x.events).length >= 3000);
    const revs = slowGot.flatMap((r) => r.events.map((e) => e.kv.modRevision));
    expect(revs).toEqual(Array.from({ length: 3000 }, (_, i) => i + 2));
    expect(fastGot.flatMap((r) => r.events.map((e) => e.kv.modRevision))).toEqual(revs);
  });

  it('progress: progress_notify ticks idle synced watchers under their own id, -1 included', async () => {
    const { kv, ws } = setup();
    kv.put({ key: b('x'), value: b('1') });
    const st = ws.watchStream();
    st.watch({ key: b('a'), startRevision: 1, progressNotify: true });
    st.watch({ key: b('a'), progressNotify: true, id: -1 });
    // The first watcher's catch-up pass (nothing for 'a') makes it synced: idle ticks skip unsynced ones.
    for (let i = 0; ws.unsyncedCount > 0; i++) {
      expect(i).toBeLessThan(100);
      await macrotask();
    }
    ws.progressTick();
    const ticks = await drainUntil(st, (r) => r.length >= 2);
    expect(ticks.sort((x, y) => Number(x.watchId) - Number(y.watchId))).toEqual([
      { watchId: -1, events: [], revision: 2 },
      { watchId: 0, events: [], revision: 2 },
    ]);
  });

  it('-1 is an id like any other: a canceled watcher -1 gets nothing more, even what was queued for it', async () => {
    const { kv, ws } = setup();
    const st = ws.watchStream();
    expect(st.watch({ key: b('a'), id: -1 })).toBe(-1);
    expect(st.watch({ key: b('a') })).toBe(0);
    kv.put({ key: b('a'), value: b('1') });
    // Both responses are queued; the cancel drops watcher -1's before anyone reads it.
    expect(st.queued).toBe(2);
    expect(st.cancel(-1)).toBe(true);
    const rs = await drainUntil(st, (r) => r.length >= 1);
    expect(rs.map((r) => r.watchId)).toEqual([0]);
    expect(st.queued).toBe(0);
  });

  it('handler mode delivers in order and pauses when the handler says so', async () => {
    const { kv, ws } = setup();
    const st = ws.watchStream({ bufferMax: 4 });
    st.watch({ key: b('a') });
    const got: number[] = [];
    st.setHandler((r) => {
      // Catch-up responses may carry several revisions.
      got.push(...r.events.map((e) => e.kv.modRevision));
      return got.length !== 2;
    });
    for (let i = 0; i < 10; i++) {
      kv.put({ key: b('a'), value: b(String(i)) });
      await macrotask();
    }
    expect(got).toEqual([2, 3]);
    st.resume();
    for (let i = 0; i < 200 && got.length < 10; i++) await new Promise((r) => setTimeout(r, 5));
    expect(got).toEqual([2, 3, 4, 5, 6, 7, 8, 9, 10, 11]);
  });
});

describe('metrics', () => {
  it('exposes watcher and store gauges', async () => {
    const { Registry } = await import('prom-client');
    const { registerMvccMetrics } = await import('../../src/mvcc/metrics.js');
    const { kv, ws } = setup();
    const registry = new Registry();
    registerMvccMetrics(registry, kv, ws);
    kv.put({ key: b('a'), value: b('1') });
    const slow = ws.watchStream({ bufferMax: 1 });
    slow.watch({ key: b('a') });
    kv.put({ key: b('a'), value: b('2') });
    kv.put({ key: b('a'), value: b('3') });
    const text = await registry.metrics();
    expect(text).toContain('etcd_debugging_mvcc_current_revision 4');
    expect(text).toContain('etcd_debugging_mvcc_watcher_total 1');
    expect(text).toContain('etcd_debugging_mvcc_slow_watcher_total 1');
    expect(text).toContain('etcetera_mvcc_watch_queued_responses 1');
  });
});
