/**
 * `etcdctl snapshot status` computed the way etcd 3.4 computes it (clientv3/snapshot Status):
 * after bbolt's consistency check, a CRC-32C over every top-level bucket name followed by each
 * of its keys and values in order; the revision is the main revision of the key bucket's last
 * key, totalKey counts every key of every bucket, totalSize is the database size (pages in use).
 */

import { BoltFormatError } from "../bbolt/index.js";
import { Crc32c } from "../mvcc/crc32c.js";
import { EtcdBackendReader, type EtcdBackendOpenOptions } from "./backend_reader.js";
import { KEY_BUCKET } from "./buckets.js";
import { decodeRevisionKey } from "./revision_key.js";

/** The fields of `etcdctl snapshot status -w json`. */
export interface SnapshotStatus {
  readonly hash: number;
  readonly revision: number;
  readonly totalKey: number;
  readonly totalSize: number;
}

export function snapshotStatus(path: string, options: EtcdBackendOpenOptions = {}): SnapshotStatus {
  const r = EtcdBackendReader.open(path, options);
  try {
    const bolt = r.bolt;
    const problems = bolt.check();
    if (problems.length > 0) {
      throw new BoltFormatError(path, undefined, 0, `snapshot file integrity check failed. ${problems.length} errors found: ${problems.slice(0, 10).join("; ")}`);
    }
    const crc = new Crc32c();
    let revision = 0;
    let totalKey = 0;
    const root = bolt.rootBucket();
    for (const top of bolt.entries(root)) {
      if (!top.isBucket) continue;
      crc.update(top.key);
      const isKey = Buffer.from(top.key).toString() === KEY_BUCKET;
      for (const e of bolt.entries(bolt.openBucket(root, top))) {
        crc.update(e.key);
        crc.update(e.value);
        if (isKey) {
          const rev = decodeRevisionKey(e.key);
          if (typeof rev === "string") throw new BoltFormatError(path, e.pgid, e.valueOffset, `bucket key: ${rev}`);
          revision = rev.main;
        }
        totalKey++;
      }
    }
    return { hash: crc.digest(), revision, totalKey, totalSize: bolt.highWaterMark * bolt.pageSize };
  } finally {
    r.close();
  }
}
