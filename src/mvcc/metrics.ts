/**
 * Prometheus gauges for the kv and watchable stores, with etcd's names where
 * etcd has one (server/mvcc/metrics.go). Values are read at scrape time, so
 * apply pays nothing for them. A registry that already holds a metric (stores
 * reopened in one process) has its collector re-pointed rather than failing.
 */

import { Counter, Gauge, type Registry } from 'prom-client';
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

/** A counter whose value is read at scrape time from a number the store keeps itself. */
export function readCounter(registry: Registry, name: string, help: string, read: () => number): void {
  if (registry.getSingleMetric(name) !== undefined) registry.removeSingleMetric(name);
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      this.reset();
      this.inc(read());
    },
  });
}

export function registerMvccMetrics(registry: Registry, kv: KvStore, watchable?: WatchableStore): void {
  const live = (f: () => number): (() => number) => () => (kv.isClosed ? 0 : f());
  const physical = live(() => kv.sizeBytes());
  gauge(registry, 'etcd_mvcc_db_total_size_in_bytes', 'Total size of the underlying database physically allocated in bytes.', physical);
  // etcd 3.4 still exports the pre-3.4 name, and its Grafana dashboard graphs that one.
  gauge(registry, 'etcd_debugging_mvcc_db_total_size_in_bytes', 'Total size of the underlying database physically allocated in bytes.', physical);
  gauge(registry, 'etcd_mvcc_db_total_size_in_use_in_bytes', 'Total size of the underlying database logically in use in bytes.', live(() => kv.sizeInUseBytes()));
  // etcd 3.4 exports each op counter twice: etcd_mvcc_* and the older etcd_debugging_mvcc_*.
  const ops = kv.ops;
  for (const prefix of ['etcd_mvcc', 'etcd_debugging_mvcc']) {
    readCounter(registry, `${prefix}_range_total`, 'Total number of ranges seen by this member.', () => ops.ranges);
    readCounter(registry, `${prefix}_put_total`, 'Total number of puts seen by this member.', () => ops.puts);
    readCounter(registry, `${prefix}_delete_total`, 'Total number of deletes seen by this member.', () => ops.deletes);
    readCounter(registry, `${prefix}_txn_total`, 'Total number of txns seen by this member.', () => ops.txns);
  }
  gauge(registry, 'etcd_debugging_mvcc_total_put_size_in_bytes', 'The total size of put kv pairs seen by this member.', () => ops.putBytes);
  gauge(registry, 'etcd_debugging_mvcc_current_revision', 'The current revision of store.', () => kv.currentRevision());
  gauge(registry, 'etcd_debugging_mvcc_compact_revision', 'The revision of the last compaction in store.', () => kv.compactRevision());
  gauge(registry, 'etcetera_mvcc_index_keys', 'Keys in the in-memory index (live or with uncompacted history).', () => kv.index.size);
  if (watchable === undefined) return;
  gauge(registry, 'etcd_debugging_mvcc_watcher_total', 'Total number of watchers.', () => watchable.syncedCount + watchable.unsyncedCount + watchable.compactedCount);
  gauge(registry, 'etcd_debugging_mvcc_slow_watcher_total', 'Total number of unsynced slow watchers.', () => watchable.unsyncedCount);
  gauge(registry, 'etcd_debugging_mvcc_watch_stream_total', 'Total number of watch streams.', () => watchable.streamCount);
  readCounter(registry, 'etcd_debugging_mvcc_events_total', 'Total number of events sent by this member.', () => watchable.eventsSent());
  gauge(registry, 'etcd_debugging_mvcc_pending_events_total', 'Total number of pending events to be sent.', () => watchable.queuedResponses());
  gauge(registry, 'etcetera_mvcc_watch_queued_responses', 'Watch responses buffered in streams, not yet consumed.', () => watchable.queuedResponses());
}
