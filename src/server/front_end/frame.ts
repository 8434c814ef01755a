/**
 * The hand-off between a member's core and its front ends (--experimental-front-ends,
 * docs/multicore.md): length-prefixed binary frames on one pipe per front end, in both directions.
 *
 * A frame is `[u32 length][u8 kind][u32 id][fields]`, `length` counting what follows it. The id
 * names one gRPC call or one plain HTTP exchange, chosen by the front end. Each kind has a fixed
 * list of fields (SCHEMA): u8, u32, f64, str (u32 length + UTF-8), bytes (u32 length + bytes) and
 * pairs (u32 count + key/value strings, for headers and trailers). Decoding refuses a frame that
 * is cut short, has bytes left over, or has a kind it does not know: both ends are the same
 * build, so anything else is a bug to stop at, not to guess around.
 */

/** Frame kinds: front end → core first, then core → front end. */
export const FrameKind = {
  /** A gRPC call starts: method, request headers, peer, client certificate CN, deadline, first message. */
  Call: 1,
  /** A request message of a streaming call. */
  Message: 2,
  /** The client half-closed its request stream. */
  HalfClose: 3,
  /** The call or exchange ended on the client's side (cancel, deadline, disconnect): the status code it ended with. */
  Cancel: 4,
  /** The client's side of a call or exchange is backed up: stop sending responses until WriteResume. */
  WritePause: 5,
  WriteResume: 6,
  /** A plain HTTP request starts (gateway, /health, /version, ...). */
  HttpRequest: 7,
  /** A chunk of an HTTP request body, then its end. */
  HttpBody: 8,
  HttpBodyEnd: 9,
  /** The front end listens on every client URL (id: its index). */
  Listening: 10,
  /** A unary or client-streaming call's one response message, and OK. */
  Reply: 20,
  /** A response message of a server-streaming or bidi call. */
  Response: 21,
  /** A call's final status: code, message, extra trailers. */
  Status: 22,
  /** The handler is not reading: stop forwarding request messages until ReadResume. */
  ReadPause: 23,
  ReadResume: 24,
  /** A whole HTTP response: status, headers, body (if any), trailers (if any). */
  HttpWhole: 25,
  /** The head of a streamed HTTP response, its chunks, its end (with trailers, if any). */
  HttpHead: 26,
  HttpChunk: 27,
  HttpEnd: 28,
  /** The core stops: close the listeners, let calls finish, exit. */
  Close: 29,
} as const;
export type FrameKind = (typeof FrameKind)[keyof typeof FrameKind];

type FieldType = "u8" | "u32" | "f64" | "str" | "bytes" | "pairs";

const SCHEMA = {
  [FrameKind.Call]: ["str", "pairs", "str", "str", "f64", "bytes"],
  [FrameKind.Message]: ["bytes"],
  [FrameKind.HalfClose]: [],
  [FrameKind.Cancel]: ["u8"],
  [FrameKind.WritePause]: [],
  [FrameKind.WriteResume]: [],
  [FrameKind.HttpRequest]: ["str", "str", "pairs", "u8", "str", "u8"],
  [FrameKind.HttpBody]: ["bytes"],
  [FrameKind.HttpBodyEnd]: [],
  [FrameKind.Listening]: [],
  [FrameKind.Reply]: ["bytes"],
  [FrameKind.Response]: ["bytes"],
  [FrameKind.Status]: ["u8", "str", "pairs"],
  [FrameKind.ReadPause]: [],
  [FrameKind.ReadResume]: [],
  [FrameKind.HttpWhole]: ["u32", "pairs", "u8", "bytes", "u8", "pairs"],
  [FrameKind.HttpHead]: ["u32", "pairs"],
  [FrameKind.HttpChunk]: ["bytes"],
  [FrameKind.HttpEnd]: ["u8", "pairs"],
  [FrameKind.Close]: [],
} as const satisfies Record<FrameKind, readonly FieldType[]>;

type Schema = typeof SCHEMA;
type FieldValue<T> = T extends "str" ? string : T extends "bytes" ? Buffer : T extends "pairs" ? string[] : number;
type Fields<T extends readonly FieldType[]> = { -readonly [I in keyof T]: FieldValue<T[I]> };

/** The field values of a frame of kind K, in SCHEMA's order ("pairs" as a flat [key, value, ...] list). */
export type FrameValues<K extends FrameKind> = Fields<Schema[K]>;

/** One decoded frame. */
export type Frame = { [K in FrameKind]: { readonly kind: K; readonly id: number; readonly values: FrameValues<K> } }[FrameKind];

/** The length prefix, and the kind and id every frame has. */
export const FRAME_PREFIX_BYTES = 4;
const FRAME_HEAD_BYTES = 5;
/** Largest frame body: a response message may be up to gRPC's 2 GiB − 1, plus its frame's few fields. */
export const FRAME_BYTES_MAX = 2 ** 31 - 1 + 64;

export class FrameError extends Error {
  constructor(message: string) {
    super(message);
    this.name = "FrameError";
  }
}

function fieldBytes(type: FieldType, value: FrameValues<FrameKind>[number]): number {
  switch (type) {
    case "u8":
      return 1;
    case "u32":
      return 4;
    case "f64":
      return 8;
    case "str":
      return 4 + Buffer.byteLength(value as string);
    case "bytes":
      return 4 + (value as Buffer).length;
    case "pairs": {
      let n = 4;
      for (const s of value as string[]) n += 4 + Buffer.byteLength(s);
      return n;
    }
  }
}

/** A length-prefixed UTF-8 string at `at`; returns where it ends. */
function putString(buf: Buffer, at: number, s: string): number {
  const n = s.length === 0 ? 0 : buf.write(s, at + 4, "utf8");
  buf.writeUInt32BE(n, at);
  return at + 4 + n;
}

/** Encodes one frame, length prefix included. */
export function encodeFrame<K extends FrameKind>(kind: K, id: number, values: FrameValues<K>): Buffer {
  const buf = Buffer.allocUnsafe(frameBytes(kind, values));
  writeFrame(buf, 0, kind, id, values);
  return buf;
}

/** Bytes of the frame encodeFrame would make, length prefix included. */
export function frameBytes<K extends FrameKind>(kind: K, values: FrameValues<K>): number {
  const types: readonly FieldType[] = SCHEMA[kind];
  const list = values as readonly FrameValues<FrameKind>[number][];
  if (list.length !== types.length) throw new FrameError(`frame kind ${kind}: ${list.length} values for ${types.length} fields`);
  let size = FRAME_PREFIX_BYTES + FRAME_HEAD_BYTES;
  for (let i = 0; i < types.length; i++) size += fieldBytes(types[i]!, list[i]!);
  return size;
}

/**
 * Writes one frame at `start` of `buf`, which must have frameBytes(kind, values) bytes there;
 * returns where it ends.
 */
export function writeFrame<K extends FrameKind>(buf: Buffer, start: number, kind: K, id: number, values: FrameValues<K>): number {
  const types: readonly FieldType[] = SCHEMA[kind];
  const list = values as readonly FrameValues<FrameKind>[number][];
  buf[start + 4] = kind;
  buf.writeUInt32BE(id, start + 5);
  let at = start + FRAME_PREFIX_BYTES + FRAME_HEAD_BYTES;
  for (let i = 0; i < types.length; i++) {
    const value = list[i]!;
    switch (types[i]!) {
      case "u8":
        buf[at++] = value as number;
        break;
      case "u32":
        buf.writeUInt32BE(value as number, at);
        at += 4;
        break;
      case "f64":
        buf.writeDoubleBE(value as number, at);
        at += 8;
        break;
      case "str":
        at = putString(buf, at, value as string);
        break;
      case "bytes": {
        const b = value as Buffer;
        buf.writeUInt32BE(b.length, at);
        b.copy(buf, at + 4);
        at += 4 + b.length;
        break;
      }
      case "pairs": {
        const pairs = value as string[];
        if (pairs.length % 2 !== 0) throw new FrameError(`frame kind ${kind}: odd number of pair strings`);
        buf.writeUInt32BE(pairs.length / 2, at);
        at += 4;
        for (const s of pairs) at = putString(buf, at, s);
        break;
      }
    }
  }
  buf.writeUInt32BE(at - start - FRAME_PREFIX_BYTES, start);
  return at;
}

/**
 * Where decodeFrameBody is in a body. One per decode, with methods rather than two closures over
 * locals: the core decodes a frame per call, and a closure pair per frame was garbage per call.
 */
class BodyCursor {
  at = FRAME_HEAD_BYTES;
  constructor(
    readonly body: Buffer,
    readonly kind: number,
  ) {}

  need(n: number): void {
    if (this.at + n > this.body.length) throw new FrameError(`frame kind ${this.kind} cut short at byte ${this.at} (needs ${n} more of ${this.body.length})`);
  }

  u32(): number {
    this.need(4);
    const v = this.body.readUInt32BE(this.at);
    this.at += 4;
    return v;
  }

  string(): string {
    const n = this.u32();
    if (n === 0) return "";
    this.need(n);
    const s = this.body.toString("utf8", this.at, this.at + n);
    this.at += n;
    return s;
  }
}

/**
 * Decodes one frame body (what follows the length prefix). Byte fields are views of `body`:
 * the reader gives each frame a body of its own, so they stay valid.
 */
export function decodeFrameBody(body: Buffer): Frame {
  if (body.length < FRAME_HEAD_BYTES) throw new FrameError(`frame of ${body.length} bytes: shorter than its head`);
  const kind = body[0]!;
  const types = (SCHEMA as Partial<Record<number, readonly FieldType[]>>)[kind];
  if (types === undefined) throw new FrameError(`unknown frame kind ${kind}`);
  const id = body.readUInt32BE(1);
  const c = new BodyCursor(body, kind);
  const values: FrameValues<FrameKind>[number][] = [];
  for (const type of types) {
    switch (type) {
      case "u8":
        c.need(1);
        values.push(body[c.at++]!);
        break;
      case "u32":
        values.push(c.u32());
        break;
      case "f64":
        c.need(8);
        values.push(body.readDoubleBE(c.at));
        c.at += 8;
        break;
      case "str":
        values.push(c.string());
        break;
      case "bytes": {
        const n = c.u32();
        c.need(n);
        values.push(body.subarray(c.at, c.at + n));
        c.at += n;
        break;
      }
      case "pairs": {
        const count = c.u32();
        // Each pair takes at least 8 bytes: a count the rest of the frame cannot hold is refused before any allocation.
        c.need(count * 8);
        const pairs: string[] = [];
        for (let i = 0; i < count; i++) pairs.push(c.string(), c.string());
        values.push(pairs);
        break;
      }
    }
  }
  if (c.at !== body.length) throw new FrameError(`frame kind ${kind}: ${body.length - c.at} bytes after its last field`);
  return { kind, id, values } as Frame;
}

/** Decodes exactly one whole frame, length prefix included (tests; the pipe uses FrameReader). */
export function decodeFrame(buf: Buffer): Frame {
  if (buf.length < FRAME_PREFIX_BYTES) throw new FrameError(`frame of ${buf.length} bytes: no length prefix`);
  const size = buf.readUInt32BE(0);
  if (buf.length !== FRAME_PREFIX_BYTES + size) throw new FrameError(`frame says ${size} bytes, has ${buf.length - FRAME_PREFIX_BYTES}`);
  return decodeFrameBody(buf.subarray(FRAME_PREFIX_BYTES));
}

/** Splits a byte stream into frames, across chunk boundaries. */
export class FrameReader {
  /** Chunks of a frame not yet complete, and their total size: joined once the frame is whole (no copy per chunk). */
  private parts: Buffer[] = [];
  private partsBytes = 0;
  /** Bytes the pending frame needs in all, once its length prefix is in (0 before). */
  private partsNeeded = 0;

  /** Feeds one chunk; calls `onFrame` for every frame it completes. Throws FrameError on a bad frame. */
  push(chunk: Buffer, onFrame: (frame: Frame) => void): void {
    if (this.parts.length > 0) {
      this.parts.push(chunk);
      this.partsBytes += chunk.length;
      if (this.partsBytes < this.needed()) return;
      chunk = Buffer.concat(this.parts, this.partsBytes);
      this.parts = [];
      this.partsBytes = 0;
      this.partsNeeded = 0;
    }
    let at = 0;
    while (chunk.length - at >= FRAME_PREFIX_BYTES) {
      const size = frameSize(chunk, at);
      if (chunk.length - at - FRAME_PREFIX_BYTES < size) break;
      const start = at + FRAME_PREFIX_BYTES;
      at = start + size;
      onFrame(decodeFrameBody(chunk.subarray(start, at)));
    }
    if (at < chunk.length) {
      this.parts.push(chunk.subarray(at));
      this.partsBytes = chunk.length - at;
    }
  }

  /** Bytes the pending frame needs in all (its prefix first, while that is incomplete). */
  private needed(): number {
    if (this.partsNeeded !== 0) return this.partsNeeded;
    if (this.partsBytes < FRAME_PREFIX_BYTES) return FRAME_PREFIX_BYTES;
    const head = this.parts[0]!.length >= FRAME_PREFIX_BYTES ? this.parts[0]! : Buffer.concat(this.parts);
    this.partsNeeded = FRAME_PREFIX_BYTES + frameSize(head, 0);
    return this.partsNeeded;
  }

  /** True when a frame was begun and not finished: the stream ending now cut it. */
  get partial(): boolean {
    return this.partsBytes > 0;
  }
}

function frameSize(buf: Buffer, at: number): number {
  const size = buf.readUInt32BE(at);
  if (size > FRAME_BYTES_MAX) throw new FrameError(`frame of ${size} bytes exceeds the limit of ${FRAME_BYTES_MAX}`);
  return size;
}
