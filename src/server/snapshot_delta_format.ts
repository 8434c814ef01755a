/**
 * The file format of an incremental snapshot (a "delta", issue 19): what a leader sends a follower
 * whose backend already holds a prefix of the history, instead of the whole image.
 *
 *   magic "ETCTDLT1" | record* | crc:u32
 *   record = length:u32  type:u8  payload[length]
 *
 * `crc` is the CRC-32 (zlib's) of every byte before it, magic included, so any flipped byte of the
 * file is refused (a flip in a length misaligns the records, which the parse refuses too). The
 * records, in order: one Header (JSON: the base it applies to and the state it brings), then per
 * table a Table record (JSON: name, columns, how it applies) followed by Rows pages, then End
 * (JSON: the counts, checked). A row is its values, each tagged (null, real, int64, text, blob),
 * so every column round-trips exactly (INTEGER as int64: leases beyond 2^53 stay whole).
 *
 * Memory: a writer buffers one page; a reader holds one read buffer and one record (bounded by
 * RECORD_BYTES_MAX), whatever the file's size.
 */
import { type FileHandle, open } from "node:fs/promises";
import { crc32 } from "node:zlib";

export const DELTA_MAGIC = Buffer.from("ETCTDLT1", "latin1");
export const DELTA_VERSION = 1;
/** No record is larger: a page of rows is cut well before it (a single row's value is < 2 GiB in SQLite, < the request limit here). */
export const RECORD_BYTES_MAX = 64 * 1024 * 1024;
/** A Rows page is written once it holds this many bytes. */
export const PAGE_BYTES = 1024 * 1024;

export enum RecordType {
  Header = 1,
  Table = 2,
  Rows = 3,
  End = 4,
}

/** A follower's backend as it answers the leader's base request (before a snapshot is sent). */
export interface SnapshotBase {
  /** The backend's consistent index (the last entry applied to it). */
  consistentIndex: number;
  /** The store's current main revision. */
  revision: number;
  /** The highest packed revision stored (identifies the kv rows held, with the consistent index). */
  maxRev: number;
  /** The compaction's main revision (scheduled or finished), -1 before any. */
  compactRevision: number;
}

/** How a table's rows apply on the receiver. */
export type TableMode =
  /** kv: the rows are appended (every one above the base's revisions). */
  | "append"
  /** meta: entries set one by one, the compaction's bookkeeping merged (see snapshot_delta.ts). */
  | "merge"
  /** every other table (leases, auth, members, alarms): its rows replace the receiver's whole. */
  | "replace";

export interface DeltaHeader {
  version: number;
  /** The follower's backend this delta applies to, and the HashKV both sides compute over it. */
  base: SnapshotBase & {
    /** HashKV over every revision ≤ base.revision, at compaction revision hashCompactRevision. */
    hash: number;
    hashCompactRevision: number;
  };
  /** The leader's backend the delta brings the follower to. */
  target: {
    consistentIndex: number;
    term: number;
    revision: number;
    /** The leader's compaction (scheduled or finished), -1 before any: the follower replays it. */
    compactRevision: number;
  };
}

export interface DeltaTable {
  name: string;
  columns: string[];
  mode: TableMode;
}

export interface DeltaEnd {
  tables: number;
  rows: number;
}

export type SqlValue = null | number | bigint | string | Buffer;

export class DeltaFormatError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "DeltaFormatError";
  }
}

/** True when `head` (the first bytes of a snapshot's data) starts a delta, not a database image. */
export function isDelta(head: Uint8Array): boolean {
  return head.byteLength >= DELTA_MAGIC.byteLength && DELTA_MAGIC.equals(Buffer.from(head.buffer, head.byteOffset, DELTA_MAGIC.byteLength));
}

// ---------------------------------------------------------------- writing

/** Writes a delta file: records buffered up to a page, each write asynchronous; `finish` adds End and the CRC and fsyncs. */
export class DeltaWriter {
  private chunks: Buffer[] = [];
  private chunkBytes = 0;
  private position = 0;
  private crc = 0;
  private tables = 0;
  private rowsTotal = 0;
  private page: Buffer[] = [];
  private pageBytes = 0;
  private pageRows = 0;
  private inTable = false;

  private constructor(private readonly fh: FileHandle) {}

  static async create(path: string, header: DeltaHeader): Promise<DeltaWriter> {
    const fh = await open(path, "wx");
    const w = new DeltaWriter(fh);
    w.raw(DELTA_MAGIC);
    w.record(RecordType.Header, Buffer.from(JSON.stringify(header), "utf8"));
    return w;
  }

  /** Bytes written so far (buffered included). */
  get sizeBytes(): number {
    return this.position + this.chunkBytes;
  }

  async table(t: DeltaTable): Promise<void> {
    await this.flushPage();
    this.tables++;
    this.inTable = true;
    this.record(RecordType.Table, Buffer.from(JSON.stringify(t), "utf8"));
    await this.flushIfFull();
  }

  /** One row of the current table. */
  async row(values: readonly SqlValue[]): Promise<void> {
    if (!this.inTable) throw new Error("delta row before its table");
    const b = encodeRow(values);
    this.page.push(b);
    this.pageBytes += b.byteLength;
    this.pageRows++;
    this.rowsTotal++;
    if (this.pageBytes >= PAGE_BYTES) await this.flushPage();
  }

  async finish(): Promise<void> {
    await this.flushPage();
    const end: DeltaEnd = { tables: this.tables, rows: this.rowsTotal };
    this.record(RecordType.End, Buffer.from(JSON.stringify(end), "utf8"));
    const trailer = Buffer.allocUnsafe(4);
    // The CRC covers everything before the trailer: what is buffered is added by raw() first.
    trailer.writeUInt32BE(crc32Of(this.chunks, this.crc), 0);
    this.chunks.push(trailer);
    this.chunkBytes += 4;
    await this.flushChunks();
    await this.fh.sync();
    await this.fh.close();
  }

  /** Closes the file without finishing it (the caller removes it). */
  async abandon(): Promise<void> {
    await this.fh.close().catch(() => undefined);
  }

  private async flushPage(): Promise<void> {
    if (this.pageRows === 0) return;
    const count = Buffer.allocUnsafe(4);
    count.writeUInt32BE(this.pageRows, 0);
    this.record(RecordType.Rows, Buffer.concat([count, ...this.page], 4 + this.pageBytes));
    this.page = [];
    this.pageBytes = 0;
    this.pageRows = 0;
    await this.flushIfFull();
  }

  private record(type: RecordType, payload: Buffer): void {
    if (payload.byteLength > RECORD_BYTES_MAX) throw new Error(`delta record of ${payload.byteLength} bytes exceeds ${RECORD_BYTES_MAX}`);
    const head = Buffer.allocUnsafe(5);
    head.writeUInt32BE(payload.byteLength, 0);
    head[4] = type;
    this.raw(head);
    this.raw(payload);
  }

  private raw(b: Buffer): void {
    this.chunks.push(b);
    this.chunkBytes += b.byteLength;
  }

  private async flushIfFull(): Promise<void> {
    if (this.chunkBytes >= PAGE_BYTES) await this.flushChunks();
  }

  /** Writes what is buffered (the CRC advances over it, except the trailer written last). */
  private async flushChunks(): Promise<void> {
    if (this.chunkBytes === 0) return;
    const data = this.chunks.length === 1 ? this.chunks[0]! : Buffer.concat(this.chunks, this.chunkBytes);
    this.chunks = [];
    this.chunkBytes = 0;
    let written = 0;
    while (written < data.byteLength) {
      const { bytesWritten } = await this.fh.write(data, written, data.byteLength - written, this.position + written);
      written += bytesWritten;
    }
    this.position += data.byteLength;
    this.crc = crc32(data, this.crc);
  }
}

function crc32Of(chunks: readonly Buffer[], start: number): number {
  let crc = start;
  for (const c of chunks) crc = crc32(c, crc);
  return crc;
}

const TAG_NULL = 0;
const TAG_REAL = 1;
const TAG_INT = 2;
const TAG_TEXT = 3;
const TAG_BLOB = 4;

export function encodeRow(values: readonly SqlValue[]): Buffer {
  let bytes = 2;
  const texts: (Buffer | undefined)[] = [];
  for (const v of values) {
    if (v === null) bytes += 1;
    else if (typeof v === "number" || typeof v === "bigint") bytes += 9;
    else if (typeof v === "string") {
      const t = Buffer.from(v, "utf8");
      texts.push(t);
      bytes += 5 + t.byteLength;
      continue;
    } else bytes += 5 + v.byteLength;
    texts.push(undefined);
  }
  if (values.length > 0xffff) throw new Error(`a row of ${values.length} columns`);
  const b = Buffer.allocUnsafe(bytes);
  b.writeUInt16BE(values.length, 0);
  let o = 2;
  values.forEach((v, i) => {
    if (v === null) {
      b[o++] = TAG_NULL;
    } else if (typeof v === "number") {
      b[o++] = TAG_REAL;
      b.writeDoubleBE(v, o);
      o += 8;
    } else if (typeof v === "bigint") {
      b[o++] = TAG_INT;
      b.writeBigInt64BE(v, o);
      o += 8;
    } else {
      const data = typeof v === "string" ? texts[i]! : v;
      b[o++] = typeof v === "string" ? TAG_TEXT : TAG_BLOB;
      b.writeUInt32BE(data.byteLength, o);
      o += 4;
      data.copy(b, o);
      o += data.byteLength;
    }
  });
  return b;
}

/** The rows of a Rows record's payload (values copied out of it: a blob is its own buffer). */
export function decodeRows(payload: Buffer): SqlValue[][] {
  if (payload.byteLength < 4) throw new DeltaFormatError("truncated rows page");
  const n = payload.readUInt32BE(0);
  let o = 4;
  const need = (k: number): void => {
    if (o + k > payload.byteLength) throw new DeltaFormatError("truncated row");
  };
  const rows: SqlValue[][] = [];
  for (let r = 0; r < n; r++) {
    need(2);
    const cols = payload.readUInt16BE(o);
    o += 2;
    const row: SqlValue[] = [];
    for (let c = 0; c < cols; c++) {
      need(1);
      const tag = payload[o++]!;
      if (tag === TAG_NULL) row.push(null);
      else if (tag === TAG_REAL) {
        need(8);
        row.push(payload.readDoubleBE(o));
        o += 8;
      } else if (tag === TAG_INT) {
        need(8);
        row.push(payload.readBigInt64BE(o));
        o += 8;
      } else if (tag === TAG_TEXT || tag === TAG_BLOB) {
        need(4);
        const len = payload.readUInt32BE(o);
        o += 4;
        need(len);
        row.push(tag === TAG_TEXT ? payload.toString("utf8", o, o + len) : Buffer.from(payload.subarray(o, o + len)));
        o += len;
      } else throw new DeltaFormatError(`unknown value tag ${tag}`);
    }
    rows.push(row);
  }
  if (o !== payload.byteLength) throw new DeltaFormatError(`${payload.byteLength - o} trailing bytes in a rows page`);
  return rows;
}

// ---------------------------------------------------------------- reading

export type DeltaRecord =
  | { type: RecordType.Header; header: DeltaHeader }
  | { type: RecordType.Table; table: DeltaTable }
  | { type: RecordType.Rows; rows: SqlValue[][] }
  | { type: RecordType.End; end: DeltaEnd };

const READ_BYTES = 1024 * 1024;

/**
 * The records of the delta at `path`, in order, checked as they are read: the structure (Header
 * first, rows only inside a table, End last and its counts right) and, when End is reached, the
 * CRC of the whole file. A caller applying records as they come must not make them final before
 * the iteration completes (the install runs in one transaction, committed after).
 */
export async function* readDelta(path: string): AsyncGenerator<DeltaRecord> {
  const fh = await open(path, "r");
  try {
    const { size } = await fh.stat();
    if (size < DELTA_MAGIC.byteLength + 4) throw new DeltaFormatError(`delta file of ${size} bytes is too short`);
    const bodyEnd = size - 4;
    let position = 0;
    let crc = 0;
    let pending = Buffer.alloc(0);
    /** Bytes [position, position + n) of the body (never the trailer), appended to `pending`. */
    const fill = async (n: number): Promise<void> => {
      while (pending.byteLength < n) {
        const want = Math.min(Math.max(READ_BYTES, n - pending.byteLength), bodyEnd - position);
        if (want <= 0) throw new DeltaFormatError("delta file ends inside a record");
        const buf = Buffer.allocUnsafe(want);
        let got = 0;
        while (got < want) {
          const { bytesRead } = await fh.read(buf, got, want - got, position + got);
          if (bytesRead === 0) throw new DeltaFormatError("delta file shorter than its size");
          got += bytesRead;
        }
        position += want;
        crc = crc32(buf, crc);
        pending = pending.byteLength === 0 ? buf : Buffer.concat([pending, buf]);
      }
    };
    const take = (n: number): Buffer => {
      const out = pending.subarray(0, n);
      pending = pending.subarray(n);
      return out;
    };
    await fill(DELTA_MAGIC.byteLength);
    if (!take(DELTA_MAGIC.byteLength).equals(DELTA_MAGIC)) throw new DeltaFormatError("not a delta (bad magic)");
    let seenHeader = false;
    let inTable = false;
    let tables = 0;
    let rows = 0;
    for (;;) {
      await fill(5);
      const head = take(5);
      const length = head.readUInt32BE(0);
      const type = head[4]!;
      if (length > RECORD_BYTES_MAX) throw new DeltaFormatError(`delta record of ${length} bytes exceeds ${RECORD_BYTES_MAX}`);
      await fill(length);
      const payload = take(length);
      if (!seenHeader && type !== RecordType.Header) throw new DeltaFormatError("delta does not start with its header");
      switch (type) {
        case RecordType.Header: {
          if (seenHeader) throw new DeltaFormatError("second delta header");
          seenHeader = true;
          const header = parseJson(payload, "header") as DeltaHeader;
          checkHeader(header);
          yield { type, header };
          break;
        }
        case RecordType.Table: {
          const table = parseJson(payload, "table") as DeltaTable;
          if (typeof table.name !== "string" || !Array.isArray(table.columns) || !["append", "merge", "replace"].includes(table.mode)) {
            throw new DeltaFormatError("malformed delta table record");
          }
          inTable = true;
          tables++;
          yield { type, table };
          break;
        }
        case RecordType.Rows: {
          if (!inTable) throw new DeltaFormatError("delta rows before any table");
          const page = decodeRows(payload);
          rows += page.length;
          yield { type, rows: page };
          break;
        }
        case RecordType.End: {
          const end = parseJson(payload, "end") as DeltaEnd;
          if (end.tables !== tables || end.rows !== rows) throw new DeltaFormatError(`delta end counts ${end.tables} tables, ${end.rows} rows; read ${tables}, ${rows}`);
          if (pending.byteLength !== 0 || position !== bodyEnd) throw new DeltaFormatError("data after the delta's end");
          const trailer = Buffer.allocUnsafe(4);
          const { bytesRead } = await fh.read(trailer, 0, 4, bodyEnd);
          if (bytesRead !== 4) throw new DeltaFormatError("delta file lacks its checksum");
          const want = trailer.readUInt32BE(0);
          if (want !== crc) throw new DeltaFormatError(`delta checksum mismatch (${crc} != ${want})`);
          yield { type, end };
          return;
        }
        default:
          throw new DeltaFormatError(`unknown delta record type ${type}`);
      }
    }
  } finally {
    await fh.close();
  }
}

/** Reads the whole delta at `path` (structure and CRC) and returns its header; throws DeltaFormatError when it is not whole and intact. */
export async function verifyDelta(path: string): Promise<DeltaHeader> {
  let header: DeltaHeader | undefined;
  let ended = false;
  for await (const r of readDelta(path)) {
    if (r.type === RecordType.Header) header = r.header;
    if (r.type === RecordType.End) ended = true;
  }
  if (header === undefined || !ended) throw new DeltaFormatError("delta incomplete");
  return header;
}

function parseJson(payload: Buffer, what: string): unknown {
  try {
    return JSON.parse(payload.toString("utf8"));
  } catch (e) {
    throw new DeltaFormatError(`delta ${what} is not JSON: ${(e as Error).message}`);
  }
}

function checkHeader(h: DeltaHeader): void {
  const ints = (o: unknown, names: string[]): boolean =>
    typeof o === "object" && o !== null && names.every((n) => Number.isSafeInteger((o as Record<string, unknown>)[n]));
  if (
    h === null ||
    typeof h !== "object" ||
    h.version !== DELTA_VERSION ||
    !ints(h.base, ["consistentIndex", "revision", "maxRev", "compactRevision", "hash", "hashCompactRevision"]) ||
    !ints(h.target, ["consistentIndex", "term", "revision", "compactRevision"])
  ) {
    throw new DeltaFormatError("malformed delta header");
  }
}
