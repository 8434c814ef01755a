/**
 * bbolt's on-disk layout (go.etcd.io/bbolt 1.3, the version etcd 3.4 links), as constants and
 * little-endian field codecs. Every integer is little-endian (bbolt writes its in-memory structs,
 * and every platform etcd ships on is little-endian).
 *
 * A file is an array of pages of `pageSize` bytes. Page 0 and page 1 are meta pages; every other
 * page is a branch, leaf or freelist page, possibly followed by `overflow` continuation pages that
 * carry no header of their own. A page starts with a 16-byte header:
 *
 *   id u64 | flags u16 | count u16 | overflow u32
 *
 * Leaf element (16 bytes): flags u32 | pos u32 | ksize u32 | vsize u32; key at element+pos,
 * value right after the key. Branch element (16 bytes): pos u32 | ksize u32 | pgid u64; key at
 * element+pos; the key is the first key of the child page. A leaf element with the bucket flag
 * holds a bucket: root u64 | sequence u64, and when root is 0 an inline leaf page follows.
 */

export const PAGE_HEADER_BYTES = 16;
export const BRANCH_ELEMENT_BYTES = 16;
export const LEAF_ELEMENT_BYTES = 16;
/** root pgid + sequence. */
export const BUCKET_HEADER_BYTES = 16;
export const META_BYTES = 64;
/** The checksum covers the meta up to (not including) its own field. */
export const META_CHECKSUM_OFFSET = 56;

export const BRANCH_PAGE_FLAG = 0x01;
export const LEAF_PAGE_FLAG = 0x02;
export const META_PAGE_FLAG = 0x04;
export const FREELIST_PAGE_FLAG = 0x10;
/** Leaf element flag: the value is a nested bucket. */
export const BUCKET_LEAF_FLAG = 0x01;

export const MAGIC = 0xed0cdaed;
export const VERSION = 2;
/** A freelist page whose u16 count is this holds its real count in the first u64. */
export const FREELIST_COUNT_OVERFLOW = 0xffff;
/** meta.freelist when the freelist is not persisted (bbolt's NoFreelistSync). */
export const PGID_NO_FREELIST = 0xffffffffffffffffn;

/** bbolt's limits (bolt.MaxKeySize, bolt.MaxValueSize). */
export const KEY_BYTES_MAX = 32768;
export const VALUE_BYTES_MAX = 2 ** 31 - 2;

/** Page sizes the reader accepts (bbolt uses the OS page size; etcd runs on 4 KiB and 64 KiB hosts). */
export const PAGE_SIZE_MIN = 512;
export const PAGE_SIZE_MAX = 1 << 16;
export const DEFAULT_PAGE_SIZE = 4096;

export function pageTypeName(flags: number): string {
  if (flags & BRANCH_PAGE_FLAG) return "branch";
  if (flags & LEAF_PAGE_FLAG) return "leaf";
  if (flags & META_PAGE_FLAG) return "meta";
  if (flags & FREELIST_PAGE_FLAG) return "freelist";
  return `unknown<0x${flags.toString(16)}>`;
}

export function isPowerOfTwo(n: number): boolean {
  return Number.isInteger(n) && n > 0 && (n & (n - 1)) === 0;
}

/** A u64 field as a JS number, or undefined when it exceeds 2^53 (no page id can). */
export function readU64Safe(view: DataView, offset: number): number | undefined {
  const v = view.getBigUint64(offset, true);
  return v <= BigInt(Number.MAX_SAFE_INTEGER) ? Number(v) : undefined;
}

export function writeU64(view: DataView, offset: number, v: number | bigint): void {
  view.setBigUint64(offset, BigInt(v), true);
}

export function viewOf(bytes: Uint8Array): DataView {
  return new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
}

/** Unsigned lexicographic byte order, the order bbolt keeps keys in. */
export function compareBytes(a: Uint8Array, b: Uint8Array): number {
  return Buffer.compare(a, b);
}
