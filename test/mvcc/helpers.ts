/** Shared helpers for the mvcc tests: temp stores, byte/string conversion, seeds. */
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { KvStore, type KvStoreOptions } from '../../src/mvcc/kvstore.js';
import type { KeyValue } from '../../src/mvcc/types.js';
import type { LeaseHooks } from '../../src/mvcc/lease_hooks.js';

export function b(s: string): Buffer {
  return Buffer.from(s, 'latin1');
}

export function s(u: Uint8Array): string {
  return Buffer.from(u).toString('latin1');
}

export function tmpDir(prefix = 'mvcc-test-'): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), prefix));
}

export function openStore(dir: string, opts: Partial<KvStoreOptions> = {}): KvStore {
  return KvStore.open({ path: path.join(dir, 'db.sqlite'), compactionSleepMs: 0, ...opts });
}

/** The seed of a randomized test (test/seed.ts). */
export { testSeed as seedFor } from "../seed.js";

export function plainKv(kv: KeyValue): { key: string; value: string; createRevision: number; modRevision: number; version: number; lease: number | bigint } {
  return {
    key: s(kv.key),
    value: s(kv.value),
    createRevision: kv.createRevision,
    modRevision: kv.modRevision,
    version: kv.version,
    lease: kv.lease,
  };
}

export function macrotask(): Promise<void> {
  return new Promise((r) => setImmediate(r));
}

/** A lessor that records the store's attach and detach calls (`leases`: granted ids and their keys). */
export class FakeLessor implements LeaseHooks {
  readonly leases = new Map<number, Set<string>>();
  readonly calls: string[] = [];
  constructor(ids: number[] = []) {
    for (const id of ids) this.leases.set(id, new Set());
  }
  exists(id: number): boolean {
    return this.leases.has(id);
  }
  attach(id: number, key: Uint8Array): void {
    this.calls.push(`attach ${id} ${s(key)}`);
    this.leases.get(id)!.add(s(key));
  }
  detach(id: number, key: Uint8Array): void {
    this.calls.push(`detach ${id} ${s(key)}`);
    this.leases.get(id)?.delete(s(key));
  }
}
