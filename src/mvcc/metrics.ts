/**
 * Prometheus gauges for the kv and watchable stores, with etcd's names where
 * etcd has one (server/mvcc/metrics.go). Values are read at scrape time, so
 * apply pays nothing for them. A registry that already holds a metric (stores
 * reopened in one process) has its collector re-pointed rather than failing.
 */

import { Gauge, type Registry } from 'prom-client';
import type { KvStore } from './kvstore.js';
import type { WatchableStore } from './watchable_store.js';

/** A gauge read at scrape time (replacing one of the same name, as a restored store re-registers). */
export function gauge(registry: Registry, name: string, help: string, read: () => number): void {
  const existing = registry.getSingleMetric(name);
  if (existing !== undefined) registry.removeSingleMetric(name);
  new Gauge({
    name,
    help,
    registers: [registry],
    collect() {
      this.set(read());
    },
  });
}

export function registerMvccMetrics(registry: Registry, kv: KvStore, watchable?: WatchableStore): void {
  const live = (f: () => number): (() => number) => () => (kv.isClosed ? 0 : f());
  gauge(registry, 'etcd_mvcc_db_total_size_in_bytes', 'Total size of the underlying database physically allocated in bytes.', live(() => kv.sizeBytes()));
  gauge(registry, 'etcd_debugging_mvcc_current_revision', 'The current revision of store.', () => kv.currentRevision());
  gauge(registry, 'etcd_debugging_mvcc_compact_revision', 'The revision of the last compaction in store.', () => kv.compactRevision());
  gauge(registry, 'etcetera_mvcc_index_keys', 'Keys in the in-memory index (live or with uncompacted history).', () => kv.index.size);
  if (watchable === undefined) return;
  gauge(registry, 'etcd_debugging_mvcc_watcher_total', 'Total number of watchers.', () => watchable.syncedCount + watchable.unsyncedCount + watchable.compactedCount);
  gauge(registry, 'etcd_debugging_mvcc_slow_watcher_total', 'Total number of unsynced slow watchers.', () => watchable.unsyncedCount);
  gauge(registry, 'etcetera_mvcc_watch_queued_responses', 'Watch responses buffered in streams, not yet consumed.', () => watchable.queuedResponses());
}
