/**
 * Public surface of the mvcc package (what the server and the lessor use).
 *
 *   const kv = KvStore.open({ backend, leases });     // registers kv+meta, rebuilds index, resumes compaction
 *   const watchable = new WatchableStore(kv);
 *   kv.apply(index, term, { put | deleteRange | txn | compaction | range })  // null if already applied
 *   kv.markApplied(index, term)                        // non-kv entries; false → skip the entry
 *   kv.range(req)                                      // serializable / linearizable local reads
 *   kv.deleteKeys(keys)                                // lease revoke: one revision
 *   (KvStore.open({ path }) opens a backend of its own: tests and tools)
 *   watchable.watchStream() → watch/cancel, next() / for await / setHandler
 */
export * from './types.js';
export * from './errors.js';
export type { LeaseHooks } from './lease_hooks.js';
export { NO_LEASES } from './lease_hooks.js';
export { KvStore } from './kvstore.js';
export type { ApplyResult, ChangeObserver, HashKvResult, KvStoreOptions, SnapshotInfo } from './kvstore.js';
export type { RangeReadOptions, RangeReadResult, RangeSpill, TxnReadResult } from './kvstore_range.js';
export { spillable } from './kvstore_range.js';
export { checkKvOp, checkPutRequest, checkTxnRequest, DEFAULT_MAX_TXN_OPS, ErrTooManyOps } from './txn_check.js';
export { WatchableStore } from './watchable_store.js';
export type { WatchableStoreOptions } from './watchable_store.js';
export { WatchStream } from './watch_stream.js';
export type { WatchCreate, WatchHandler } from './watch_stream.js';
export type { WatchResponse } from './watcher.js';
export { registerMvccMetrics } from './metrics.js';
