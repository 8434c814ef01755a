/**
 * Prometheus gauges for the kv and watchable stores, with etcd's names where
 * etcd has one (server/mvcc/metrics.go). Values are read at scrape time, so
 * apply pays nothing for them. A registry that already holds a metric (stores
 * reopened in one process) has its collector re-pointed rather than failing.
 */

import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import type { KvStore, KvTimings } from './kvstore.js';
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

/** prometheus.ExponentialBuckets(start, factor, count). */
function exponential(start: number, factor: number, count: number): number[] {
  return Array.from({ length: count }, (_, i) => start * factor ** i);
}

function histogram(registry: Registry, name: string, help: string, buckets: number[]): Histogram {
  const existing = registry.getSingleMetric(name);
  if (existing instanceof Histogram) return existing;
  return new Histogram({ name, help, buckets, registers: [registry] });
}

/** etcd's mvcc/metrics.go compaction and hash histograms (names, help and buckets). */
function kvTimings(registry: Registry): KvTimings {
  const indexPause = histogram(registry, 'etcd_debugging_mvcc_index_compaction_pause_duration_milliseconds', 'Bucketed histogram of index compaction pause duration.', exponential(0.5, 2, 14));
  const dbPause = histogram(registry, 'etcd_debugging_mvcc_db_compaction_pause_duration_milliseconds', 'Bucketed histogram of db compaction pause duration.', exponential(1, 2, 13));
  const total = histogram(registry, 'etcd_debugging_mvcc_db_compaction_total_duration_milliseconds', 'Bucketed histogram of db compaction total duration.', exponential(100, 2, 14));
  const existingKeys = registry.getSingleMetric('etcd_debugging_mvcc_db_compaction_keys_total');
  const keys = existingKeys instanceof Counter ? existingKeys : new Counter({ name: 'etcd_debugging_mvcc_db_compaction_keys_total', help: 'Total number of db keys compacted.', registers: [registry] });
  const hash = histogram(registry, 'etcd_mvcc_hash_duration_seconds', 'The latency distribution of storage hash operation.', exponential(0.01, 2, 15));
  const hashRev = histogram(registry, 'etcd_mvcc_hash_rev_duration_seconds', 'The latency distribution of storage hash by revision operation.', exponential(0.01, 2, 15));
  return {
    compaction: {
      keys: (n) => keys.inc(n),
      // One batch compacts the index and the db together: its time is both pauses.
      pauseMs: (ms) => {
        indexPause.observe(ms);
        dbPause.observe(ms);
      },
      totalMs: (ms) => total.observe(ms),
    },
    hashSeconds: (s) => hash.observe(s),
    hashRevSeconds: (s) => hashRev.observe(s),
  };
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
  kv.timings = kvTimings(registry);
  gauge(registry, 'etcd_debugging_mvcc_total_put_size_in_bytes', 'The total size of put kv pairs seen by this member.', () => ops.putBytes);
  gauge(registry, 'etcd_debugging_mvcc_current_revision', 'The current revision of store.', () => kv.currentRevision());
  gauge(registry, 'etcd_debugging_mvcc_compact_revision', 'The revision of the last compaction in store.', () => kv.compactRevision());
  gauge(registry, 'etcd_debugging_mvcc_keys_total', 'Total number of keys.', () => kv.index.aliveCount);
  gauge(registry, 'etcetera_mvcc_index_keys', 'Keys in the in-memory index (live or with uncompacted history).', () => kv.index.size);
  if (watchable === undefined) return;
  gauge(registry, 'etcd_debugging_mvcc_watcher_total', 'Total number of watchers.', () => watchable.syncedCount + watchable.unsyncedCount + watchable.compactedCount);
  gauge(registry, 'etcd_debugging_mvcc_slow_watcher_total', 'Total number of unsynced slow watchers.', () => watchable.unsyncedCount);
  gauge(registry, 'etcd_debugging_mvcc_watch_stream_total', 'Total number of watch streams.', () => watchable.streamCount);
  readCounter(registry, 'etcd_debugging_mvcc_events_total', 'Total number of events sent by this member.', () => watchable.eventsSent());
  gauge(registry, 'etcd_debugging_mvcc_pending_events_total', 'Total number of pending events to be sent.', () => watchable.queuedResponses());
  gauge(registry, 'etcetera_mvcc_watch_queued_responses', 'Watch responses buffered in streams, not yet consumed.', () => watchable.queuedResponses());
}
