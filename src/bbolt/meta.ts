/**
 * bbolt's meta page: the root of a file. Two copies live in pages 0 and 1; a write transaction
 * writes the copy at `txid % 2`, so a torn write can only break one of them, and the reader takes
 * the valid copy with the highest txid (bolt.DB.meta()).
 *
 * Layout at page offset 16 (64 bytes): magic u32 | version u32 | pageSize u32 | flags u32 |
 * root bucket (root u64, sequence u64) | freelist u64 | pgid u64 (high-water mark: pages in use)
 * | txid u64 | checksum u64 = FNV-1a 64 of the 56 bytes before it.
 */

import {
  MAGIC,
  META_BYTES,
  META_CHECKSUM_OFFSET,
  META_PAGE_FLAG,
  PAGE_HEADER_BYTES,
  VERSION,
  viewOf,
  writeU64,
} from "./layout.js";

export interface Meta {
  readonly pageSize: number;
  readonly flags: number;
  /** Root page of the root bucket (the bucket holding the top-level buckets). */
  readonly root: bigint;
  readonly sequence: bigint;
  /** Freelist page, or PGID_NO_FREELIST. */
  readonly freelist: bigint;
  /** High-water mark: the number of pages the file uses. */
  readonly pgid: bigint;
  readonly txid: bigint;
}

const FNV64_OFFSET = 0xcbf29ce484222325n;
const FNV64_PRIME = 0x100000001b3n;
const U64_MASK = 0xffffffffffffffffn;

/** FNV-1a, 64-bit (Go's hash/fnv New64a). */
export function fnv1a64(bytes: Uint8Array): bigint {
  let h = FNV64_OFFSET;
  for (const b of bytes) {
    h ^= BigInt(b);
    h = (h * FNV64_PRIME) & U64_MASK;
  }
  return h;
}

export type MetaDecodeResult = { ok: true; meta: Meta } | { ok: false; reason: string };

/** Decodes and validates (magic, version, checksum) the 64 meta bytes. */
export function decodeMeta(bytes: Uint8Array): MetaDecodeResult {
  if (bytes.length < META_BYTES) return { ok: false, reason: `meta needs ${META_BYTES} bytes, ${bytes.length} present` };
  const v = viewOf(bytes);
  const magic = v.getUint32(0, true);
  if (magic !== MAGIC) return { ok: false, reason: `bad magic 0x${magic.toString(16)} (want 0x${MAGIC.toString(16)})` };
  const version = v.getUint32(4, true);
  if (version !== VERSION) return { ok: false, reason: `unsupported version ${version} (want ${VERSION})` };
  const checksum = v.getBigUint64(META_CHECKSUM_OFFSET, true);
  const sum = fnv1a64(bytes.subarray(0, META_CHECKSUM_OFFSET));
  if (checksum !== sum) {
    return { ok: false, reason: `meta checksum 0x${checksum.toString(16)} does not match its contents (0x${sum.toString(16)})` };
  }
  return {
    ok: true,
    meta: {
      pageSize: v.getUint32(8, true),
      flags: v.getUint32(12, true),
      root: v.getBigUint64(16, true),
      sequence: v.getBigUint64(24, true),
      freelist: v.getBigUint64(32, true),
      pgid: v.getBigUint64(40, true),
      txid: v.getBigUint64(48, true),
    },
  };
}

/** A whole meta page (header + meta + zero padding) for page `pgid` (0 or 1). */
export function encodeMetaPage(meta: Meta, pgid: 0 | 1): Uint8Array {
  const page = new Uint8Array(meta.pageSize);
  const pv = viewOf(page);
  writeU64(pv, 0, pgid);
  pv.setUint16(8, META_PAGE_FLAG, true);
  const m = page.subarray(PAGE_HEADER_BYTES, PAGE_HEADER_BYTES + META_BYTES);
  const v = viewOf(m);
  v.setUint32(0, MAGIC, true);
  v.setUint32(4, VERSION, true);
  v.setUint32(8, meta.pageSize, true);
  v.setUint32(12, meta.flags, true);
  writeU64(v, 16, meta.root);
  writeU64(v, 24, meta.sequence);
  writeU64(v, 32, meta.freelist);
  writeU64(v, 40, meta.pgid);
  writeU64(v, 48, meta.txid);
  writeU64(v, META_CHECKSUM_OFFSET, fnv1a64(m.subarray(0, META_CHECKSUM_OFFSET)));
  return page;
}
