/**
 * What etcd serves, computed from key-bucket records, and what etcdctl says it serves, so the
 * tests can compare a real etcd with our reader and writer field by field.
 */
import type { EtcdKeyValue, EtcdRevisionRecord } from "../../src/etcd_format/index.js";

/** A KeyValue as `etcdctl get -w json` prints it (bytes base64, ids as exact decimal strings). */
export interface CtlKv {
  key: string;
  value: string;
  create_revision: number;
  mod_revision: number;
  version: number;
  lease: string;
}

/** JSON.parse, keeping integers of 16+ digits (ids) exact as strings. */
export function parseJsonExact(text: string): unknown {
  return JSON.parse(text.replace(/([:[,]\s*)(-?\d{16,})(?=\s*[,}\]])/g, '$1"$2"'));
}

export function ctlKvOf(kv: EtcdKeyValue): CtlKv {
  return {
    key: Buffer.from(kv.key).toString("base64"),
    value: Buffer.from(kv.value).toString("base64"),
    create_revision: kv.createRevision,
    mod_revision: kv.modRevision,
    version: kv.version,
    lease: kv.lease.toString(),
  };
}

/** etcdctl's JSON kvs, with its omitted zero fields filled in. */
export function normalizeCtlKvs(json: unknown): CtlKv[] {
  const kvs = (json as { kvs?: Record<string, unknown>[] }).kvs ?? [];
  return kvs.map((k) => ({
    key: String(k["key"] ?? ""),
    value: String(k["value"] ?? ""),
    create_revision: Number(k["create_revision"] ?? 0),
    mod_revision: Number(k["mod_revision"] ?? 0),
    version: Number(k["version"] ?? 0),
    lease: String(k["lease"] ?? "0"),
  }));
}

/** The live keys after applying every record in order, in key order. */
export function liveState(records: Iterable<EtcdRevisionRecord>): CtlKv[] {
  const live = new Map<string, EtcdKeyValue>();
  for (const r of records) {
    const k = Buffer.from(r.kv.key).toString("hex");
    if (r.tombstone) live.delete(k);
    else live.set(k, r.kv);
  }
  return [...live.entries()].sort(([a], [b]) => Buffer.compare(Buffer.from(a, "hex"), Buffer.from(b, "hex"))).map(([, kv]) => ctlKvOf(kv));
}

/** Keeps what a compaction at `rev` keeps: revisions >= rev, and each key's latest put at or below rev. */
export function compacted(records: EtcdRevisionRecord[], rev: number): EtcdRevisionRecord[] {
  const latestAtOrBelow = new Map<string, EtcdRevisionRecord>();
  for (const r of records) if (r.main <= rev) latestAtOrBelow.set(Buffer.from(r.kv.key).toString("hex"), r);
  return records.filter((r) => {
    if (r.main > rev) return true;
    const latest = latestAtOrBelow.get(Buffer.from(r.kv.key).toString("hex"));
    return latest === r && !r.tombstone;
  });
}
