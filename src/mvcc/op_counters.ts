/**
 * What the kv store counts per request, for etcd's etcd_mvcc_{range,put,delete,txn}_total (and
 * their etcd_debugging_mvcc_* twins) and etcd_debugging_mvcc_total_put_size_in_bytes. Plain
 * numbers, incremented on the request path; metrics.ts reads them at scrape time, so the store
 * pays an addition per request and nothing for Prometheus.
 *
 * etcd's rules (mvcc/metrics_txn.go): every range, put and delete of a request counts, the
 * operations of a txn's taken branches included; a txn counts as a txn only when it ran more than
 * one operation (a txn of one put is counted as a put, as etcd's metricsTxnWrite.End does).
 */
import type { PutRequest, TxnResponse } from './types.js';

export class OpCounters {
  ranges = 0;
  puts = 0;
  deletes = 0;
  txns = 0;
  /** Bytes of key plus value of every put (etcd: totalPutSizeGauge). */
  putBytes = 0;

  put(req: PutRequest): void {
    this.puts++;
    this.putBytes += byteLength(req.key) + byteLength(req.value);
  }

  /** A txn's taken branches, from its response (nested txns included). */
  txn(res: TxnResponse): void {
    const before = this.ranges + this.puts + this.deletes;
    this.countResponses(res);
    if (this.ranges + this.puts + this.deletes - before > 1) this.txns++;
  }

  private countResponses(res: TxnResponse): void {
    for (const r of res.responses) {
      if (r.responseRange !== undefined) this.ranges++;
      else if (r.responsePut !== undefined) this.puts++;
      else if (r.responseDeleteRange !== undefined) this.deletes++;
      else if (r.responseTxn !== undefined) this.countResponses(r.responseTxn);
    }
  }
}

function byteLength(b: Uint8Array | string | undefined): number {
  if (b === undefined) return 0;
  return typeof b === 'string' ? Buffer.byteLength(b) : b.length;
}
