/**
 * Writes a fresh, compact bbolt file from buckets whose keys arrive in ascending order.
 *
 * Streaming: a bucket's tree is built bottom-up while its keys arrive. The leaf being filled
 * and one partial branch page per tree level are all that is held; a page is written as soon
 * as it is full, so memory is bounded by (tree depth + 1) pages plus the largest value, whatever
 * the input size. Pages get their ids in the order they are written, so the file is produced
 * front to back; only the two meta pages (which name the root) are written last.
 *
 * The result is what bbolt's own compaction produces: every page below the high-water mark is a
 * meta page, a tree page or the (empty) freelist, so `bbolt check` / Tx.Check and etcd accept it.
 * Small buckets without nested buckets are stored inline in their parent, as bbolt does.
 */

import { BoltWriterError } from "./errors.js";
import {
  BRANCH_ELEMENT_BYTES,
  BRANCH_PAGE_FLAG,
  BUCKET_HEADER_BYTES,
  BUCKET_LEAF_FLAG,
  compareBytes,
  DEFAULT_PAGE_SIZE,
  FREELIST_PAGE_FLAG,
  isPowerOfTwo,
  KEY_BYTES_MAX,
  LEAF_ELEMENT_BYTES,
  LEAF_PAGE_FLAG,
  PAGE_HEADER_BYTES,
  PAGE_SIZE_MAX,
  PAGE_SIZE_MIN,
  VALUE_BYTES_MAX,
  viewOf,
  writeU64,
} from "./layout.js";
import { encodeMetaPage, type Meta } from "./meta.js";
import type { PageSink } from "./page_sink.js";

export interface BoltWriterOptions {
  /** Default 4096 (the page size of the hosts etcd runs on, which bbolt takes from the OS). */
  pageSize?: number;
  /** Bytes of a page filled before the next one starts; default the whole page (compact). */
  fillBytes?: number;
  /** Consecutive pages are handed to the sink in chunks of about this size; default 1 MiB. */
  chunkBytes?: number;
  /** txid of the newer meta page; default 1 (a fresh database, as bbolt's init writes). */
  txid?: bigint;
}

interface LeafElem {
  key: Uint8Array;
  value: Uint8Array;
  flags: number;
}

interface BranchElem {
  key: Uint8Array;
  child: number;
}

interface BranchLevel {
  elems: BranchElem[];
  bytes: number;
  flushed: number;
}

/** The tree of one bucket while its keys arrive. */
class TreeBuilder {
  readonly name: Uint8Array | undefined;
  leaf: LeafElem[] = [];
  leafBytes = PAGE_HEADER_BYTES;
  leafPagesFlushed = 0;
  readonly levels: BranchLevel[] = [];
  lastKey: Uint8Array | undefined;
  hasNested = false;

  constructor(name: Uint8Array | undefined) {
    this.name = name;
  }
}

export interface BoltWriteResult {
  readonly meta: Meta;
  /** File size: meta.pgid pages. */
  readonly sizeBytes: number;
}

function toBytes(b: Uint8Array | string): Uint8Array {
  return typeof b === "string" ? Buffer.from(b) : b;
}

export class BoltWriter {
  private readonly sink: PageSink;
  readonly pageSize: number;
  private readonly fillBytes: number;
  private readonly chunkBytes: number;
  private readonly txid: bigint;
  private readonly stack: TreeBuilder[] = [new TreeBuilder(undefined)];
  /** Next page id to allocate; 0 and 1 are the meta pages. */
  private nextPgid = 2;
  private chunk: Uint8Array[] = [];
  private chunkLen = 0;
  private chunkOffset: number;
  private finished = false;

  constructor(sink: PageSink, options: BoltWriterOptions = {}) {
    const ps = options.pageSize ?? DEFAULT_PAGE_SIZE;
    if (!isPowerOfTwo(ps) || ps < PAGE_SIZE_MIN || ps > PAGE_SIZE_MAX) {
      throw new BoltWriterError(`page size ${ps} is not a power of two in [${PAGE_SIZE_MIN}, ${PAGE_SIZE_MAX}]`);
    }
    const fill = options.fillBytes ?? ps;
    if (fill < PAGE_HEADER_BYTES + LEAF_ELEMENT_BYTES || fill > ps) throw new BoltWriterError(`fillBytes ${fill} outside [32, ${ps}]`);
    this.sink = sink;
    this.pageSize = ps;
    this.fillBytes = fill;
    this.chunkBytes = options.chunkBytes ?? 1 << 20;
    this.txid = options.txid ?? 1n;
    if (this.txid < 1n) throw new BoltWriterError(`txid ${this.txid} < 1`);
    this.chunkOffset = 2 * ps;
  }

  private top(): TreeBuilder {
    if (this.finished) throw new BoltWriterError("write after finish()");
    return this.stack[this.stack.length - 1]!;
  }

  /** Reserves `key` as the next key of the current bucket (strictly ascending, as bbolt stores them). */
  private claimKey(b: TreeBuilder, key: Uint8Array): void {
    if (key.length === 0) throw new BoltWriterError("empty key (bbolt requires a key)");
    if (key.length > KEY_BYTES_MAX) throw new BoltWriterError(`key of ${key.length} bytes exceeds bbolt's ${KEY_BYTES_MAX}`);
    if (b.lastKey !== undefined && compareBytes(key, b.lastKey) <= 0) {
      throw new BoltWriterError(`keys must ascend: ${Buffer.from(key).toString("hex")} after ${Buffer.from(b.lastKey).toString("hex")}`);
    }
    b.lastKey = key;
  }

  /** Puts a key into the current bucket (the innermost open one). Buffers are kept until written: do not reuse them. */
  put(key: Uint8Array | string, value: Uint8Array | string): void {
    const b = this.top();
    if (b.name === undefined) throw new BoltWriterError("the root bucket holds only buckets: beginBucket() first");
    const k = toBytes(key);
    const v = toBytes(value);
    if (v.length > VALUE_BYTES_MAX) throw new BoltWriterError(`value of ${v.length} bytes exceeds bbolt's ${VALUE_BYTES_MAX}`);
    this.claimKey(b, k);
    this.addLeaf(b, { key: k, value: v, flags: 0 });
  }

  /** Opens a nested bucket (a top-level one when none is open); its name sorts with the keys around it. */
  beginBucket(name: Uint8Array | string): void {
    const b = this.top();
    const n = toBytes(name);
    this.claimKey(b, n);
    this.stack.push(new TreeBuilder(n));
  }

  /** Closes the innermost bucket: its tree is finished and it becomes an entry of its parent. */
  endBucket(sequence = 0n): void {
    const b = this.top();
    if (b.name === undefined) throw new BoltWriterError("endBucket() without beginBucket()");
    this.stack.pop();
    const parent = this.top();
    parent.hasNested = true;
    this.addLeaf(parent, { key: b.name, value: this.bucketValue(b, sequence), flags: BUCKET_LEAF_FLAG });
  }

  /** Open buckets, innermost last (for the caller's assertions). */
  depth(): number {
    return this.stack.length - 1;
  }

  /** Finishes the file: root tree, freelist, both meta pages. */
  finish(): BoltWriteResult {
    const b = this.top();
    if (b.name !== undefined) throw new BoltWriterError(`finish() with bucket ${Buffer.from(b.name).toString()} still open`);
    const root = this.finishTree(b);
    const freelist = this.allocate(1);
    const fl = new Uint8Array(this.pageSize);
    const fv = viewOf(fl);
    writeU64(fv, 0, freelist);
    fv.setUint16(8, FREELIST_PAGE_FLAG, true);
    this.emit(freelist, fl);
    this.flushChunk();
    const meta: Meta = {
      pageSize: this.pageSize,
      flags: 0,
      root: BigInt(root),
      sequence: 0n,
      freelist: BigInt(freelist),
      pgid: BigInt(this.nextPgid),
      txid: this.txid,
    };
    // bbolt writes txid's meta to page txid % 2; the other page holds the previous txid over the
    // same tree, so either copy alone opens the same database.
    const newer = Number(this.txid % 2n) as 0 | 1;
    const metas = new Uint8Array(2 * this.pageSize);
    metas.set(encodeMetaPage(meta, newer), newer * this.pageSize);
    metas.set(encodeMetaPage({ ...meta, txid: this.txid - 1n }, (1 - newer) as 0 | 1), (1 - newer) * this.pageSize);
    this.sink.writeMeta(metas);
    this.finished = true;
    return { meta, sizeBytes: this.nextPgid * this.pageSize };
  }

  private addLeaf(b: TreeBuilder, e: LeafElem): void {
    const size = LEAF_ELEMENT_BYTES + e.key.length + e.value.length;
    if (b.leaf.length > 0 && b.leafBytes + size > this.fillBytes) this.flushLeaf(b);
    b.leaf.push(e);
    b.leafBytes += size;
  }

  private addBranch(b: TreeBuilder, level: number, e: BranchElem): void {
    let lv = b.levels[level];
    if (!lv) {
      lv = { elems: [], bytes: PAGE_HEADER_BYTES, flushed: 0 };
      b.levels[level] = lv;
    }
    const size = BRANCH_ELEMENT_BYTES + e.key.length;
    if (lv.elems.length > 0 && lv.bytes + size > this.fillBytes) this.flushBranch(b, level);
    lv.elems.push(e);
    lv.bytes += size;
  }

  private flushLeaf(b: TreeBuilder): void {
    const elems = b.leaf;
    const pages = Math.ceil(b.leafBytes / this.pageSize);
    const pgid = this.allocate(pages);
    this.emit(pgid, this.leafPage(pgid, elems, pages * this.pageSize));
    b.leafPagesFlushed++;
    b.leaf = [];
    b.leafBytes = PAGE_HEADER_BYTES;
    // An empty leaf is only ever a bucket's lone root page; it gets no branch element.
    if (elems.length > 0) this.addBranch(b, 0, { key: Uint8Array.from(elems[0]!.key), child: pgid });
    else this.addBranch(b, 0, { key: new Uint8Array(0), child: pgid });
  }

  private flushBranch(b: TreeBuilder, level: number): void {
    const lv = b.levels[level]!;
    const pages = Math.ceil(lv.bytes / this.pageSize);
    const pgid = this.allocate(pages);
    this.emit(pgid, this.branchPage(pgid, lv.elems, pages * this.pageSize));
    const first = lv.elems[0]!.key;
    lv.flushed++;
    lv.elems = [];
    lv.bytes = PAGE_HEADER_BYTES;
    this.addBranch(b, level + 1, { key: first, child: pgid });
  }

  /** Writes what is left of a bucket's tree bottom-up and returns its root page. */
  private finishTree(b: TreeBuilder): number {
    // Any key added leaves a pending leaf element (a leaf is flushed before an add, never after),
    // so this writes the last leaf; an empty bucket gets one empty leaf page as its root.
    if (b.leaf.length > 0 || b.leafPagesFlushed === 0) this.flushLeaf(b);
    for (let level = 0; ; level++) {
      const lv = b.levels[level]!;
      if (lv.flushed === 0 && lv.elems.length === 1) return lv.elems[0]!.child;
      this.flushBranch(b, level);
    }
  }

  /** The parent's value for a finished bucket: header, plus the leaf page itself when inline. */
  private bucketValue(b: TreeBuilder, sequence: bigint): Uint8Array {
    // bbolt's Bucket.inlineable: a single leaf, no nested buckets, at most a quarter page.
    if (!b.hasNested && b.leafPagesFlushed === 0 && b.leafBytes <= this.pageSize / 4) {
      const value = new Uint8Array(BUCKET_HEADER_BYTES + b.leafBytes);
      const v = viewOf(value);
      writeU64(v, 0, 0);
      writeU64(v, 8, sequence);
      value.set(this.leafPage(0, b.leaf, b.leafBytes), BUCKET_HEADER_BYTES);
      return value;
    }
    const root = this.finishTree(b);
    const value = new Uint8Array(BUCKET_HEADER_BYTES);
    const v = viewOf(value);
    writeU64(v, 0, root);
    writeU64(v, 8, sequence);
    return value;
  }

  private allocate(pages: number): number {
    const pgid = this.nextPgid;
    this.nextPgid += pages;
    return pgid;
  }

  private header(page: Uint8Array, pgid: number, flags: number, count: number): DataView {
    if (count > 0xffff) throw new BoltWriterError(`page ${pgid}: ${count} elements exceed a page's u16 count`);
    const v = viewOf(page);
    writeU64(v, 0, pgid);
    v.setUint16(8, flags, true);
    v.setUint16(10, count, true);
    // An inline page (pgid 0) is never a multiple of the page size and has no overflow.
    v.setUint32(12, pgid === 0 ? 0 : page.length / this.pageSize - 1, true);
    return v;
  }

  private leafPage(pgid: number, elems: LeafElem[], size: number): Uint8Array {
    const page = new Uint8Array(size);
    const v = this.header(page, pgid, LEAF_PAGE_FLAG, elems.length);
    let data = PAGE_HEADER_BYTES + elems.length * LEAF_ELEMENT_BYTES;
    for (let i = 0; i < elems.length; i++) {
      const e = elems[i]!;
      const eo = PAGE_HEADER_BYTES + i * LEAF_ELEMENT_BYTES;
      v.setUint32(eo, e.flags, true);
      v.setUint32(eo + 4, data - eo, true);
      v.setUint32(eo + 8, e.key.length, true);
      v.setUint32(eo + 12, e.value.length, true);
      page.set(e.key, data);
      page.set(e.value, data + e.key.length);
      data += e.key.length + e.value.length;
    }
    return page;
  }

  private branchPage(pgid: number, elems: BranchElem[], size: number): Uint8Array {
    const page = new Uint8Array(size);
    const v = this.header(page, pgid, BRANCH_PAGE_FLAG, elems.length);
    let data = PAGE_HEADER_BYTES + elems.length * BRANCH_ELEMENT_BYTES;
    for (let i = 0; i < elems.length; i++) {
      const e = elems[i]!;
      const eo = PAGE_HEADER_BYTES + i * BRANCH_ELEMENT_BYTES;
      v.setUint32(eo, data - eo, true);
      v.setUint32(eo + 4, e.key.length, true);
      writeU64(v, eo + 8, e.child);
      page.set(e.key, data);
      data += e.key.length;
    }
    return page;
  }

  /** Pages are emitted in id order; consecutive ones are batched into one sink write. */
  private emit(pgid: number, page: Uint8Array): void {
    if (pgid * this.pageSize !== this.chunkOffset + this.chunkLen) {
      throw new BoltWriterError(`internal: page ${pgid} emitted out of order`);
    }
    this.chunk.push(page);
    this.chunkLen += page.length;
    if (this.chunkLen >= this.chunkBytes) this.flushChunk();
  }

  private flushChunk(): void {
    if (this.chunkLen === 0) return;
    const bytes = this.chunk.length === 1 ? this.chunk[0]! : Buffer.concat(this.chunk, this.chunkLen);
    this.sink.write(this.chunkOffset, bytes);
    this.chunkOffset += this.chunkLen;
    this.chunk = [];
    this.chunkLen = 0;
  }
}
