/**
 * A snapshot as Maintenance.Snapshot sends it, produced front to back without a temporary file:
 * the backend's bbolt bytes in chunks, each with the bytes still to come (etcd's
 * SnapshotResponse.remaining_bytes), then one last chunk holding the SHA-256 of everything sent
 * (remaining 0). `etcdctl snapshot save` writes exactly these bytes to its file.
 *
 * The content is read twice (see bbolt/stream.ts): `content()` must return the same data both
 * times, e.g. iterables over one read transaction held for the whole call.
 */

import { createHash } from "node:crypto";
import { streamBolt, type BoltStreamOptions } from "../bbolt/index.js";
import { writeEtcdBuckets, type EtcdBackendContent } from "./backend_writer.js";

/** One SnapshotResponse: `blob` and `remaining_bytes`. */
export interface SnapshotChunk {
  readonly blob: Uint8Array;
  readonly remainingBytes: number;
}

export interface SnapshotStreamOptions extends BoltStreamOptions {
  /** Largest blob per chunk; default 32 KiB (etcd's snapshotSendBufferSize). */
  chunkBytesMax?: number;
}

export interface SnapshotStreamResult {
  /** Bytes of the bbolt file (the SHA-256 chunk not counted, as in etcd's remaining_bytes). */
  readonly sizeBytes: number;
  readonly sha256: Buffer;
  /** Highest main revision in the key bucket. */
  readonly revision: number;
}

export async function streamEtcdSnapshot(
  content: () => EtcdBackendContent,
  send: (chunk: SnapshotChunk) => Promise<void> | void,
  options: SnapshotStreamOptions = {},
): Promise<SnapshotStreamResult> {
  const chunkBytesMax = options.chunkBytesMax ?? 32 * 1024;
  const hash = createHash("sha256");
  let total = 0;
  let sent = 0;
  let revision = 0;
  const result = await streamBolt(
    async (w, pause) => {
      revision = (await writeEtcdBuckets(w, content(), pause)).revision;
    },
    async (chunk) => {
      for (let at = 0; at < chunk.length; at += chunkBytesMax) {
        const blob = chunk.subarray(at, Math.min(chunk.length, at + chunkBytesMax));
        hash.update(blob);
        sent += blob.length;
        await send({ blob, remainingBytes: total - sent });
      }
    },
    { ...options, onPlanned: (planned) => (total = planned.sizeBytes) },
  );
  if (sent !== total) throw new Error(`snapshot stream: sent ${sent} bytes of ${total}`);
  const sha256 = hash.digest();
  await send({ blob: sha256, remainingBytes: 0 });
  return { sizeBytes: result.sizeBytes, sha256, revision };
}
