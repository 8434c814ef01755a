/**
 * A bbolt database as plain nested maps, the writer driven from it and the reader read back into
 * it, so property tests compare whole databases.
 */
import { BoltReader, BoltWriter, BufferPageSink, type BoltBucket, type BoltWriterOptions } from "../../src/bbolt/index.js";

export type ModelBucket = Map<string, Uint8Array | ModelBucket>; // keys: hex of the key bytes

/** Builds a model from (path, key, value) triples; a name already used as the other kind is skipped. */
export function buildModel(items: { path: Uint8Array[]; key: Uint8Array; value: Uint8Array }[]): ModelBucket {
  const root: ModelBucket = new Map();
  for (const it of items) {
    let b = root;
    let ok = true;
    for (const p of it.path) {
      const h = Buffer.from(p).toString("hex");
      let next = b.get(h);
      if (next === undefined) {
        next = new Map();
        b.set(h, next);
      }
      if (next instanceof Uint8Array) {
        ok = false;
        break;
      }
      b = next;
    }
    if (!ok || b === root) continue; // the root bucket holds only buckets
    const h = Buffer.from(it.key).toString("hex");
    if (!(b.get(h) instanceof Map)) b.set(h, it.value);
  }
  return root;
}

function sortedEntries(b: ModelBucket): [string, Uint8Array | ModelBucket][] {
  return [...b.entries()].sort(([x], [y]) => Buffer.compare(Buffer.from(x, "hex"), Buffer.from(y, "hex")));
}

export function writeModel(w: BoltWriter, b: ModelBucket): void {
  for (const [k, v] of sortedEntries(b)) {
    const key = Buffer.from(k, "hex");
    if (v instanceof Map) {
      w.beginBucket(key);
      writeModel(w, v);
      w.endBucket();
    } else w.put(key, v);
  }
}

export function modelToFile(model: ModelBucket, options: BoltWriterOptions = {}): Uint8Array {
  const sink = new BufferPageSink();
  const w = new BoltWriter(sink, options);
  writeModel(w, model);
  const result = w.finish();
  const bytes = sink.bytes();
  if (bytes.length !== result.sizeBytes) throw new Error(`file of ${bytes.length} bytes, writer says ${result.sizeBytes}`);
  return bytes;
}

/** Reads a whole bucket back into a model (nested buckets recursively). */
export function readModel(r: BoltReader, b: BoltBucket = r.rootBucket()): ModelBucket {
  const out: ModelBucket = new Map();
  for (const e of r.entries(b)) {
    out.set(Buffer.from(e.key).toString("hex"), e.isBucket ? readModel(r, r.openBucket(b, e)) : Uint8Array.from(e.value));
  }
  return out;
}

/** A short, order-stable digest of a model, for comparing big ones without giant diffs. */
export function describeModel(b: ModelBucket): string[] {
  const lines: string[] = [];
  const walk = (m: ModelBucket, prefix: string): void => {
    for (const [k, v] of sortedEntries(m)) {
      if (v instanceof Map) {
        lines.push(`${prefix}${k}/`);
        walk(v, `${prefix}${k}/`);
      } else lines.push(`${prefix}${k}=${v.length}:${Buffer.from(v.subarray(0, 16)).toString("hex")}:${Buffer.from(v.subarray(-16)).toString("hex")}`);
    }
  };
  walk(b, "");
  return lines;
}
