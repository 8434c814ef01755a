/**
 * A read-only bbolt reader: validates the meta pages, walks buckets (nested and inline) and
 * iterates their keys in order, reading pages on demand through a PageSource.
 *
 * Everything read is checked before it is used: page ids against the high-water mark, element
 * positions against the page, key order across the whole bucket, tree depth, page types. A bad
 * file raises BoltFormatError (file, page, byte offset); the reader never yields a partial result
 * silently and never loops: every descent goes one level deeper (bounded) and every key must be
 * greater than the one before, so a page referenced twice or a cycle is caught where it starts.
 */

import { BoltFormatError } from "./errors.js";
import {
  BRANCH_ELEMENT_BYTES,
  BRANCH_PAGE_FLAG,
  BUCKET_HEADER_BYTES,
  BUCKET_LEAF_FLAG,
  compareBytes,
  DEFAULT_PAGE_SIZE,
  FREELIST_COUNT_OVERFLOW,
  FREELIST_PAGE_FLAG,
  isPowerOfTwo,
  LEAF_ELEMENT_BYTES,
  LEAF_PAGE_FLAG,
  META_BYTES,
  PAGE_HEADER_BYTES,
  PAGE_SIZE_MAX,
  PAGE_SIZE_MIN,
  pageTypeName,
  PGID_NO_FREELIST,
  readU64Safe,
  viewOf,
} from "./layout.js";
import { decodeMeta, type Meta } from "./meta.js";
import { BufferPageSource, FilePageSource, type PageSource } from "./page_source.js";

/** Deeper than any real tree: a 4 KiB-page tree of 2^40 keys is under 20 levels. */
const TREE_DEPTH_MAX = 64;
/** Nested buckets deeper than this are refused (etcd nests none). */
const BUCKET_DEPTH_MAX = 64;
/** One page with its overflow may not span more than this (bbolt's values stop at 2 GiB; etcd's at its request limit). */
const PAGE_SPAN_BYTES_MAX = 256 * 1024 * 1024;

/** A page as read: its header fields and the bytes of the page and its overflow pages. */
interface Page {
  /** The page's id; for an inline bucket, the id of the leaf page that holds it. */
  readonly id: number;
  readonly flags: number;
  readonly count: number;
  readonly overflow: number;
  readonly bytes: Uint8Array;
  readonly view: DataView;
  /** File offset of bytes[0]. */
  readonly offset: number;
}

/** One key of a bucket. For a nested bucket, `value` is the raw bucket value (open it with openBucket). */
export interface BoltEntry {
  readonly key: Uint8Array;
  readonly value: Uint8Array;
  readonly isBucket: boolean;
  /** Page that holds the element and file offset of the value, for errors about the value. */
  readonly pgid: number;
  readonly valueOffset: number;
}

/** A bucket: a tree rooted at a page, or an inline leaf page stored in its parent's value. */
export interface BoltBucket {
  /** Names from the root bucket down (the root bucket has none). */
  readonly path: readonly Uint8Array[];
  readonly root: number;
  readonly sequence: bigint;
  readonly inlinePage: Page | undefined;
}

export interface BoltReaderOptions {
  /** Used when meta page 0 is unreadable and page 1 has to be found; bbolt's default is the OS page size. */
  pageSizeHint?: number;
}

function bucketLabel(b: BoltBucket): string {
  return b.path.length === 0 ? "root bucket" : `bucket ${b.path.map((p) => JSON.stringify(Buffer.from(p).toString("latin1"))).join("/")}`;
}

export class BoltReader {
  readonly source: PageSource;
  /** The meta in use: the valid copy with the highest txid. */
  readonly meta: Meta;
  /** 0 or 1: which meta page `meta` came from. */
  readonly metaPgid: number;
  readonly pageSize: number;
  /** meta.pgid as a number: pages at and above it are not part of the file. */
  readonly highWaterMark: number;

  private constructor(source: PageSource, meta: Meta, metaPgid: number) {
    this.source = source;
    this.meta = meta;
    this.metaPgid = metaPgid;
    this.pageSize = meta.pageSize;
    this.highWaterMark = Number(meta.pgid);
  }

  /** Opens a file for positioned reads; the caller closes the reader. */
  static open(path: string, options: BoltReaderOptions = {}): BoltReader {
    const source = FilePageSource.open(path);
    try {
      return BoltReader.fromSource(source, options);
    } catch (err) {
      source.close();
      throw err;
    }
  }

  static fromBuffer(bytes: Uint8Array, name = "<buffer>", options: BoltReaderOptions = {}): BoltReader {
    return BoltReader.fromSource(new BufferPageSource(bytes, name), options);
  }

  static fromSource(source: PageSource, options: BoltReaderOptions = {}): BoltReader {
    const metaLen = PAGE_HEADER_BYTES + META_BYTES;
    const tryMeta = (pgid: number, pageSize: number): { meta?: Meta; reason: string } => {
      const offset = pgid * pageSize;
      if (offset + metaLen > source.sizeBytes) return { reason: `page ${pgid} (byte offset ${offset}): file truncated (${source.sizeBytes} bytes)` };
      const r = decodeMeta(source.read(offset + PAGE_HEADER_BYTES, META_BYTES, pgid));
      if (!r.ok) return { reason: `page ${pgid} (byte offset ${offset + PAGE_HEADER_BYTES}): ${r.reason}` };
      if (pgid === 1 && r.meta.pageSize !== pageSize) {
        return { reason: `page ${pgid} (byte offset ${offset}): meta says page size ${r.meta.pageSize}, found at ${pageSize}` };
      }
      return { meta: r.meta, reason: "" };
    };
    const m0 = tryMeta(0, DEFAULT_PAGE_SIZE);
    const reasons: string[] = [];
    let m1: { meta?: Meta; reason: string } | undefined;
    if (m0.meta && isPowerOfTwo(m0.meta.pageSize) && m0.meta.pageSize >= PAGE_SIZE_MIN && m0.meta.pageSize <= PAGE_SIZE_MAX) {
      m1 = tryMeta(1, m0.meta.pageSize);
    } else {
      reasons.push(m0.meta ? `page 0: meta page size ${m0.meta.pageSize} is not a power of two in [${PAGE_SIZE_MIN}, ${PAGE_SIZE_MAX}]` : m0.reason);
      m0.meta = undefined;
      // Page 0 is unreadable: look for page 1 at the hinted size, then at every plausible size.
      const sizes = [options.pageSizeHint ?? DEFAULT_PAGE_SIZE];
      for (let s = PAGE_SIZE_MIN; s <= PAGE_SIZE_MAX; s *= 2) if (!sizes.includes(s)) sizes.push(s);
      for (const s of sizes) {
        const c = tryMeta(1, s);
        if (c.meta) {
          m1 = c;
          break;
        }
        if (s === sizes[0]) m1 = c;
      }
    }
    if (m1 && !m1.meta) reasons.push(m1.reason);
    // bolt.DB.meta(): the higher txid first, the other if the first fails validation.
    let chosen: { meta: Meta; pgid: number } | undefined;
    if (m0.meta && m1?.meta) chosen = m1.meta.txid > m0.meta.txid ? { meta: m1.meta, pgid: 1 } : { meta: m0.meta, pgid: 0 };
    else if (m0.meta) chosen = { meta: m0.meta, pgid: 0 };
    else if (m1?.meta) chosen = { meta: m1.meta, pgid: 1 };
    if (!chosen) throw new BoltFormatError(source.name, undefined, 0, `not a bbolt database: no valid meta page (${reasons.join("; ")})`);
    BoltReader.checkMeta(source, chosen.meta, chosen.pgid);
    return new BoltReader(source, chosen.meta, chosen.pgid);
  }

  /**
   * The chosen meta must describe a file that is all there. A truncated file is refused rather
   * than read through the older meta: that would be a silent step back in time.
   */
  private static checkMeta(source: PageSource, meta: Meta, metaPgid: number): void {
    const fail = (reason: string): never => {
      throw new BoltFormatError(source.name, metaPgid, metaPgid * meta.pageSize + PAGE_HEADER_BYTES, reason);
    };
    if (meta.pgid < 3n || meta.pgid > BigInt(Number.MAX_SAFE_INTEGER)) fail(`meta high-water mark ${meta.pgid} is not a page count`);
    if (meta.root < 2n || meta.root >= meta.pgid) fail(`meta root page ${meta.root} outside [2, ${meta.pgid})`);
    if (meta.freelist !== PGID_NO_FREELIST && (meta.freelist < 2n || meta.freelist >= meta.pgid)) {
      fail(`meta freelist page ${meta.freelist} outside [2, ${meta.pgid})`);
    }
    const need = Number(meta.pgid) * meta.pageSize;
    if (source.sizeBytes < need) {
      fail(`file truncated: the meta (txid ${meta.txid}) says ${meta.pgid} pages of ${meta.pageSize} bytes (${need} bytes), the file has ${source.sizeBytes}`);
    }
  }

  close(): void {
    this.source.close();
  }

  private error(pgid: number | undefined, offset: number, reason: string): BoltFormatError {
    return new BoltFormatError(this.source.name, pgid, offset, reason);
  }

  /** Reads page `pgid` with its overflow pages; `from` is the page (and offset) that referenced it. */
  private page(pgid: number, fromPgid: number, fromOffset: number): Page {
    if (!Number.isSafeInteger(pgid) || pgid < 2 || pgid >= this.highWaterMark) {
      throw this.error(fromPgid, fromOffset, `reference to page ${pgid} outside [2, ${this.highWaterMark}) (the meta's high-water mark)`);
    }
    const ps = this.pageSize;
    const offset = pgid * ps;
    const first = this.source.read(offset, ps, pgid);
    const v = viewOf(first);
    const id = readU64Safe(v, 0);
    if (id !== pgid) throw this.error(pgid, offset, `page header says id ${v.getBigUint64(0, true)}`);
    const flags = v.getUint16(8, true);
    const count = v.getUint16(10, true);
    const overflow = v.getUint32(12, true);
    if (pgid + overflow >= this.highWaterMark) {
      throw this.error(pgid, offset + 12, `overflow of ${overflow} pages runs past the high-water mark ${this.highWaterMark}`);
    }
    const span = (overflow + 1) * ps;
    if (span > PAGE_SPAN_BYTES_MAX) throw this.error(pgid, offset + 12, `overflow of ${overflow} pages exceeds ${PAGE_SPAN_BYTES_MAX} bytes`);
    const bytes = overflow === 0 ? first : this.source.read(offset, span, pgid);
    return { id: pgid, flags, count, overflow, bytes, view: overflow === 0 ? v : viewOf(bytes), offset };
  }

  /** Element i of a leaf page, bounds-checked. */
  private leafElement(p: Page, i: number): BoltEntry {
    const eo = PAGE_HEADER_BYTES + i * LEAF_ELEMENT_BYTES;
    const v = p.view;
    const flags = v.getUint32(eo, true);
    const ks = eo + v.getUint32(eo + 4, true);
    const ke = ks + v.getUint32(eo + 8, true);
    const ve = ke + v.getUint32(eo + 12, true);
    if (ve > p.bytes.length) {
      throw this.error(p.id, p.offset + eo, `leaf element ${i} points past its page (key/value end at ${ve}, page has ${p.bytes.length} bytes)`);
    }
    if ((flags & ~BUCKET_LEAF_FLAG) !== 0) throw this.error(p.id, p.offset + eo, `leaf element ${i} has unknown flags 0x${flags.toString(16)}`);
    return {
      key: p.bytes.subarray(ks, ke),
      value: p.bytes.subarray(ke, ve),
      isBucket: (flags & BUCKET_LEAF_FLAG) !== 0,
      pgid: p.id,
      valueOffset: p.offset + ke,
    };
  }

  private branchElement(p: Page, i: number): { key: Uint8Array; child: number; offset: number } {
    const eo = PAGE_HEADER_BYTES + i * BRANCH_ELEMENT_BYTES;
    const v = p.view;
    const ks = eo + v.getUint32(eo, true);
    const ke = ks + v.getUint32(eo + 4, true);
    if (ke > p.bytes.length) {
      throw this.error(p.id, p.offset + eo, `branch element ${i} points past its page (key ends at ${ke}, page has ${p.bytes.length} bytes)`);
    }
    const child = readU64Safe(v, eo + 8);
    return { key: p.bytes.subarray(ks, ke), child: child ?? -1, offset: p.offset + eo + 8 };
  }

  /** Header sanity for a tree page: a branch or leaf whose elements fit. */
  private checkTreePage(p: Page, isRoot: boolean, b: BoltBucket): void {
    const isBranch = (p.flags & BRANCH_PAGE_FLAG) !== 0;
    const isLeaf = (p.flags & LEAF_PAGE_FLAG) !== 0;
    if (isBranch === isLeaf) {
      throw this.error(p.id, p.offset + 8, `${bucketLabel(b)} reaches a ${pageTypeName(p.flags)} page where a branch or leaf page belongs`);
    }
    const elem = isBranch ? BRANCH_ELEMENT_BYTES : LEAF_ELEMENT_BYTES;
    if (PAGE_HEADER_BYTES + p.count * elem > p.bytes.length) {
      throw this.error(p.id, p.offset + 10, `${p.count} elements do not fit in a page of ${p.bytes.length} bytes`);
    }
    // bbolt never leaves an empty page inside a tree; only an empty bucket's root (a leaf) is empty.
    if (p.count === 0 && (isBranch || !isRoot)) throw this.error(p.id, p.offset + 10, `empty ${pageTypeName(p.flags)} page inside ${bucketLabel(b)}`);
  }

  /** The root bucket (holds the top-level buckets). */
  rootBucket(): BoltBucket {
    return { path: [], root: Number(this.meta.root), sequence: this.meta.sequence, inlinePage: undefined };
  }

  /** Parses a nested bucket's value (from an entry with isBucket). */
  openBucket(parent: BoltBucket, entry: BoltEntry): BoltBucket {
    const path = [...parent.path, entry.key];
    if (path.length > BUCKET_DEPTH_MAX) throw this.error(entry.pgid, entry.valueOffset, `buckets nested deeper than ${BUCKET_DEPTH_MAX}`);
    if (!entry.isBucket) throw this.error(entry.pgid, entry.valueOffset, `key is not a bucket`);
    const value = entry.value;
    if (value.length < BUCKET_HEADER_BYTES) {
      throw this.error(entry.pgid, entry.valueOffset, `bucket value of ${value.length} bytes is shorter than a bucket header`);
    }
    const v = viewOf(value);
    const root = readU64Safe(v, 0);
    if (root === undefined) throw this.error(entry.pgid, entry.valueOffset, `bucket root page ${v.getBigUint64(0, true)} is not a page id`);
    const sequence = v.getBigUint64(8, true);
    if (root !== 0) return { path, root, sequence, inlinePage: undefined };
    // An inline bucket: a leaf page header and elements follow the bucket header.
    const bytes = value.subarray(BUCKET_HEADER_BYTES);
    const offset = entry.valueOffset + BUCKET_HEADER_BYTES;
    if (bytes.length < PAGE_HEADER_BYTES) throw this.error(entry.pgid, offset, `inline bucket of ${bytes.length} bytes has no page header`);
    const pv = viewOf(bytes);
    const page: Page = {
      id: entry.pgid,
      flags: pv.getUint16(8, true),
      count: pv.getUint16(10, true),
      overflow: 0,
      bytes,
      view: pv,
      offset,
    };
    const b: BoltBucket = { path, root: 0, sequence, inlinePage: page };
    if (page.flags !== LEAF_PAGE_FLAG) throw this.error(entry.pgid, offset + 8, `inline ${bucketLabel(b)} is a ${pageTypeName(page.flags)} page, not a leaf`);
    this.checkTreePage(page, true, b);
    return b;
  }

  /** The bucket at `path` (names from the root), or undefined when a name is missing or not a bucket. */
  bucket(...path: (string | Uint8Array)[]): BoltBucket | undefined {
    let b = this.rootBucket();
    for (const name of path) {
      const e = this.getEntry(b, typeof name === "string" ? Buffer.from(name) : name);
      if (!e?.isBucket) return undefined;
      b = this.openBucket(b, e);
    }
    return b;
  }

  /** The entry for `key` in bucket `b`, by descending the tree (one page per level). */
  getEntry(b: BoltBucket, key: Uint8Array): BoltEntry | undefined {
    let p = this.rootPage(b);
    for (let depth = 0; ; depth++) {
      if (depth > TREE_DEPTH_MAX) throw this.error(p.id, p.offset, `${bucketLabel(b)} is deeper than ${TREE_DEPTH_MAX} levels`);
      if (p.flags & LEAF_PAGE_FLAG) {
        // Binary search: the elements are in key order (iteration checks it).
        let lo = 0;
        let hi = p.count;
        while (lo < hi) {
          const mid = (lo + hi) >>> 1;
          const c = compareBytes(this.leafElement(p, mid).key, key);
          if (c === 0) return this.leafElement(p, mid);
          if (c < 0) lo = mid + 1;
          else hi = mid;
        }
        return undefined;
      }
      // The last branch element whose key is <= key (or the first one).
      let lo = 0;
      let hi = p.count;
      while (lo < hi) {
        const mid = (lo + hi) >>> 1;
        if (compareBytes(this.branchElement(p, mid).key, key) <= 0) lo = mid + 1;
        else hi = mid;
      }
      const e = this.branchElement(p, Math.max(0, lo - 1));
      const child = this.page(e.child, p.id, e.offset);
      this.checkTreePage(child, false, b);
      p = child;
    }
  }

  /** The value of `key` in bucket `b` (undefined when absent or a nested bucket). */
  get(b: BoltBucket, key: Uint8Array | string): Uint8Array | undefined {
    const e = this.getEntry(b, typeof key === "string" ? Buffer.from(key) : key);
    return e && !e.isBucket ? e.value : undefined;
  }

  private rootPage(b: BoltBucket): Page {
    if (b.inlinePage) return b.inlinePage;
    const p = this.page(b.root, b.root, b.root * this.pageSize);
    this.checkTreePage(p, true, b);
    return p;
  }

  /**
   * Every entry of bucket `b` in key order, nested buckets included (as entries with isBucket).
   * Holds one page per tree level. `onPage` sees every page of the tree once (for check()).
   */
  *entries(b: BoltBucket, onPage?: (pgid: number, overflow: number) => void): Generator<BoltEntry> {
    interface Frame {
      page: Page;
      index: number;
      /** Keys below this page are >= lower and < upper (from the branch elements above). */
      lower: Uint8Array | undefined;
      upper: Uint8Array | undefined;
    }
    const root = this.rootPage(b);
    if (!b.inlinePage) onPage?.(root.id, root.overflow);
    const stack: Frame[] = [{ page: root, index: 0, lower: undefined, upper: undefined }];
    let last: Uint8Array | undefined;
    while (stack.length > 0) {
      const top = stack[stack.length - 1]!;
      const p = top.page;
      if (top.index >= p.count) {
        stack.pop();
        continue;
      }
      const i = top.index++;
      if (p.flags & LEAF_PAGE_FLAG) {
        const e = this.leafElement(p, i);
        const at = p.offset + PAGE_HEADER_BYTES + i * LEAF_ELEMENT_BYTES;
        if (last !== undefined && compareBytes(e.key, last) <= 0) {
          throw this.error(p.id, at, `${bucketLabel(b)}: key ${i} is not greater than the key before it (keys out of order, or a page referenced twice)`);
        }
        if ((top.lower && compareBytes(e.key, top.lower) < 0) || (top.upper && compareBytes(e.key, top.upper) >= 0)) {
          throw this.error(p.id, at, `${bucketLabel(b)}: key ${i} lies outside the range its branch element gives the page`);
        }
        last = e.key;
        yield e;
        continue;
      }
      const e = this.branchElement(p, i);
      let upper = top.upper;
      if (i + 1 < p.count) {
        upper = this.branchElement(p, i + 1).key;
        if (compareBytes(upper, e.key) <= 0) {
          throw this.error(p.id, p.offset + PAGE_HEADER_BYTES + (i + 1) * BRANCH_ELEMENT_BYTES, `branch keys out of order at element ${i + 1}`);
        }
      }
      if (stack.length >= TREE_DEPTH_MAX) throw this.error(p.id, e.offset, `${bucketLabel(b)} is deeper than ${TREE_DEPTH_MAX} levels (a cycle?)`);
      const child = this.page(e.child, p.id, e.offset);
      this.checkTreePage(child, false, b);
      onPage?.(child.id, child.overflow);
      stack.push({ page: child, index: 0, lower: e.key, upper });
    }
  }

  /** The shape of a bucket's tree: levels (1 for a lone leaf), pages by kind, overflow pages. */
  treeStats(b: BoltBucket): { depth: number; branchPages: number; leafPages: number; overflowPages: number; keys: number } {
    const stats = { depth: 1, branchPages: 0, leafPages: 0, overflowPages: 0, keys: 0 };
    const walk = (p: Page, depth: number): void => {
      stats.depth = Math.max(stats.depth, depth);
      stats.overflowPages += p.overflow;
      if (p.flags & LEAF_PAGE_FLAG) {
        stats.leafPages++;
        stats.keys += p.count;
        return;
      }
      stats.branchPages++;
      if (depth >= TREE_DEPTH_MAX) throw this.error(p.id, p.offset, `${bucketLabel(b)} is deeper than ${TREE_DEPTH_MAX} levels (a cycle?)`);
      for (let i = 0; i < p.count; i++) {
        const e = this.branchElement(p, i);
        const child = this.page(e.child, p.id, e.offset);
        this.checkTreePage(child, false, b);
        walk(child, depth + 1);
      }
    };
    walk(this.rootPage(b), 1);
    return stats;
  }

  /** The page ids on the freelist (empty when the freelist is not persisted). */
  freePages(): number[] {
    if (this.meta.freelist === PGID_NO_FREELIST) return [];
    const fl = Number(this.meta.freelist);
    const p = this.page(fl, this.metaPgid, this.metaPgid * this.pageSize + PAGE_HEADER_BYTES + 32);
    if ((p.flags & FREELIST_PAGE_FLAG) === 0) throw this.error(fl, p.offset + 8, `the meta's freelist page is a ${pageTypeName(p.flags)} page`);
    let count = p.count;
    let at = PAGE_HEADER_BYTES;
    if (count === FREELIST_COUNT_OVERFLOW) {
      const n = readU64Safe(p.view, at);
      if (n === undefined || at + 8 + n * 8 > p.bytes.length) throw this.error(fl, p.offset + at, `freelist count does not fit in its page`);
      count = n;
      at += 8;
    }
    if (at + count * 8 > p.bytes.length) throw this.error(fl, p.offset + 10, `freelist of ${count} ids does not fit in its page`);
    const ids: number[] = [];
    for (let i = 0; i < count; i++) {
      const id = readU64Safe(p.view, at + i * 8);
      if (id === undefined || id < 2 || id >= this.highWaterMark) {
        throw this.error(fl, p.offset + at + i * 8, `freelist id ${p.view.getBigUint64(at + i * 8, true)} outside [2, ${this.highWaterMark})`);
      }
      ids.push(id);
    }
    return ids;
  }

  /**
   * bbolt's Tx.Check: every page below the high-water mark is a meta page, the freelist, on the
   * freelist, or in exactly one bucket tree. Returns the problems found (empty when consistent);
   * structural damage met on the way throws BoltFormatError as every read does.
   */
  check(): string[] {
    const problems: string[] = [];
    const hwm = this.highWaterMark;
    const state = new Uint8Array(hwm); // 0 unseen, 1 reachable, 2 free
    state[0] = 1;
    state[1] = 1;
    if (this.meta.freelist !== PGID_NO_FREELIST) {
      const fl = Number(this.meta.freelist);
      const p = this.page(fl, this.metaPgid, this.metaPgid * this.pageSize);
      for (let i = 0; i <= p.overflow; i++) state[fl + i] = 1;
    }
    for (const id of this.freePages()) {
      if (state[id] === 2) problems.push(`page ${id}: already freed`);
      else if (state[id] === 1) problems.push(`page ${id}: freed page is in use`);
      state[id] = 2;
    }
    const mark = (pgid: number, overflow: number): void => {
      for (let i = 0; i <= overflow; i++) {
        const id = pgid + i;
        if (state[id] === 1) problems.push(`page ${id}: multiple references`);
        else if (state[id] === 2) problems.push(`page ${id}: reachable freed`);
        state[id] = 1;
      }
    };
    const walk = (b: BoltBucket): void => {
      for (const e of this.entries(b, mark)) if (e.isBucket) walk(this.openBucket(b, e));
    };
    walk(this.rootBucket());
    // Without a persisted freelist (NoFreelistSync, which etcd 3.4 sets) bbolt rebuilds the
    // freelist as exactly the unreachable pages, so only a persisted freelist can miss one.
    if (this.meta.freelist !== PGID_NO_FREELIST) {
      for (let id = 0; id < hwm; id++) if (state[id] === 0) problems.push(`page ${id}: unreachable unfreed`);
    }
    return problems;
  }
}
