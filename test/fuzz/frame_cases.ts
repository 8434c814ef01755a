/**
 * The malformed-gRPC cases of grpc_frames.test.ts: each is a pure function of (seed, case index),
 * so one case replays alone, and the same case can be sent to etcetera and to a reference etcd.
 */
import { type RawCall, grpcFrame } from "./h2_raw.js";
import type { RpcMethod } from "./methods.js";
import { ALL_GARBAGE_KINDS, type GarbageKind, MALFORMED_KINDS, garbageFor, isMalformed } from "./proto_garbage.js";
import { Rng } from "./rng.js";

/** The deadline every fuzzed call carries, so streaming calls end too ("3S" in grpc-timeout). */
export const CALL_TIMEOUT_S = 3;
/** How long past its deadline an answer may take on a loaded 2-core box before it counts as a hang. */
export const HANG_SLACK_MS = 12_000;

export type FrameCaseKind =
  | `protobuf:${GarbageKind}`
  | "truncated-prefix"
  | "length-beyond-body"
  | "length-beyond-body-open"
  | "oversized-prefix"
  | "compressed-identity"
  | "compressed-unknown-encoding"
  | "no-message"
  | "two-messages"
  | "wrong-content-type"
  | "missing-te"
  | "bad-grpc-timeout"
  | "unknown-path"
  | "rst-mid-message";

/** What the server must do with a case, whatever the target. */
export type Expect =
  /** A gRPC status with exactly this code. */
  | { readonly code: number }
  /** Any gRPC status or a plain HTTP answer (the input may be valid; only a hang or crash is wrong). */
  | { readonly any: true }
  /** Nothing is awaited (we reset the stream ourselves). */
  | { readonly abandoned: true };

export interface FrameCase {
  readonly index: number;
  readonly kind: FrameCaseKind;
  readonly method: RpcMethod;
  readonly call: RawCall;
  readonly expect: Expect;
  /** Whether the answer depends on server state (then targets may legitimately differ). */
  readonly stateful: boolean;
  /**
   * Whether etcd's answer is a pure function of the bytes (it refuses them before running anything),
   * so etcetera's answer can be compared with it case by case.
   */
  readonly comparable: boolean;
}

export const Code = {
  OK: 0,
  CANCELLED: 1,
  UNKNOWN: 2,
  INVALID_ARGUMENT: 3,
  DEADLINE_EXCEEDED: 4,
  NOT_FOUND: 5,
  RESOURCE_EXHAUSTED: 8,
  UNIMPLEMENTED: 12,
  INTERNAL: 13,
  UNAVAILABLE: 14,
} as const;

const BAD_TIMEOUTS = ["", "1", "S", "abc", "123456789S", "-1S", "1x", "1.5S", "10s", " 1S", "1 S", "99999999999m"];
const BAD_CONTENT_TYPES = ["text/plain", "application/json", "application/grpc-web", "application/grpcx", "application/octet-stream"];

export interface FrameCaseOptions {
  /** --max-request-bytes of the target (the receive limit is this + 512 KiB). */
  readonly maxRequestBytes: number;
  /**
   * Only kinds whose answer never depends on server state and never creates state, and none that
   * waits for its deadline (a throughput mix for the leak check).
   */
  readonly statelessOnly?: boolean;
}

const CASE_WEIGHTS: readonly (readonly [number, FrameCaseKind | "protobuf"])[] = [
  [40, "protobuf"],
  [4, "truncated-prefix"],
  [4, "length-beyond-body"],
  [2, "length-beyond-body-open"],
  [3, "oversized-prefix"],
  [3, "compressed-identity"],
  [2, "compressed-unknown-encoding"],
  [3, "no-message"],
  [2, "two-messages"],
  [3, "wrong-content-type"],
  [2, "missing-te"],
  [3, "bad-grpc-timeout"],
  [2, "unknown-path"],
  [4, "rst-mid-message"],
];

function timeoutHeader(): Record<string, string> {
  return { "grpc-timeout": `${CALL_TIMEOUT_S}S` };
}

/**
 * Case `index` of the run with `seed`. In stateless mode a protobuf case is always malformed and
 * every decodable body is the empty message of a read-only method, so the answer is fixed.
 */
export function frameCase(seed: number, index: number, methods: readonly RpcMethod[], opts: FrameCaseOptions): FrameCase {
  const rng = Rng.forCase(seed, index);
  let kind0 = rng.weighted(CASE_WEIGHTS);
  // Stateless runs are throughput runs (the leak check): no case that sits until its deadline.
  if (opts.statelessOnly === true && kind0 === "length-beyond-body-open") kind0 = "length-beyond-body";
  const method = rng.pick(methods);
  const waitMs = CALL_TIMEOUT_S * 1000 + HANG_SLACK_MS;
  const base = { path: method.path, headers: timeoutHeader(), waitMs };
  const body = (): Buffer => Buffer.alloc(0); // the empty message: a valid request of every type
  const make = (kind: FrameCaseKind, call: RawCall, expect: Expect, stateful: boolean, comparable = !stateful): FrameCase => ({
    index,
    kind,
    method,
    call,
    expect,
    stateful,
    comparable,
  });

  if (kind0 === "protobuf") {
    const kinds = opts.statelessOnly === true ? MALFORMED_KINDS : ALL_GARBAGE_KINDS;
    const g = garbageFor(rng, method.requestType, rng.pick(kinds));
    const bytes = g.bytes;
    // Split the message over several DATA writes now and then (the deframer must reassemble it).
    const framed = grpcFrame(bytes);
    const chunks = rng.bool(0.3) && framed.length > 2 ? splitAt(framed, 1 + rng.int(framed.length - 1)) : [framed];
    const malformed = isMalformed(g.kind);
    // A wrongly typed known field is refused by etcd's decoder before anything runs.
    const comparable = malformed || g.kind === "wrong-wire-type";
    return make(`protobuf:${g.kind}`, { ...base, chunks }, malformed ? { code: Code.INTERNAL } : { any: true }, !malformed, comparable);
  }
  const kind = kind0;
  switch (kind) {
    case "truncated-prefix":
      return make(kind, { ...base, chunks: [grpcFrame(body()).subarray(0, rng.between(1, 4))] }, { any: true }, false);
    case "length-beyond-body": {
      const part = rng.bytes(rng.between(0, 64));
      return make(kind, { ...base, chunks: [grpcFrame(part, { declaredLength: part.length + rng.between(1, 1000) })] }, { any: true }, false);
    }
    case "length-beyond-body-open": {
      // The request side stays open: the server waits for the rest until the deadline.
      const part = rng.bytes(rng.between(0, 64));
      return make(kind, { ...base, chunks: [grpcFrame(part, { declaredLength: part.length + 1000 })], endStream: false }, { any: true }, false);
    }
    case "oversized-prefix": {
      const limit = opts.maxRequestBytes + 512 * 1024;
      const declared = rng.pick([limit + 1, limit + rng.between(2, 1 << 20), 0xffffffff]);
      return make(kind, { ...base, chunks: [grpcFrame(rng.bytes(rng.between(0, 32)), { declaredLength: declared })] }, { code: Code.RESOURCE_EXHAUSTED }, false);
    }
    case "compressed-identity":
      return make(kind, { ...base, chunks: [grpcFrame(body(), { compressed: true })] }, { any: true }, false);
    case "compressed-unknown-encoding":
      return make(
        kind,
        { ...base, headers: { ...timeoutHeader(), "grpc-encoding": rng.pick(["x-fuzz", "snappy", "br"]) }, chunks: [grpcFrame(rng.bytes(8), { compressed: true })] },
        { any: true },
        false,
      );
    case "no-message":
      return make(kind, { ...base, chunks: [] }, { any: true }, method.requestStream);
    case "two-messages":
      return make(kind, { ...base, path: "/etcdserverpb.KV/Range", chunks: [grpcFrame(rangeOf("fuzz/none")), grpcFrame(rangeOf("fuzz/none2"))] }, { any: true }, false);
    case "wrong-content-type":
      return make(kind, { ...base, headers: { ...timeoutHeader(), "content-type": rng.pick(BAD_CONTENT_TYPES) }, chunks: [grpcFrame(rangeOf("fuzz/none"))] }, { any: true }, false);
    case "missing-te":
      return make(kind, { ...base, path: "/etcdserverpb.KV/Range", headers: { ...timeoutHeader(), te: undefined }, chunks: [grpcFrame(rangeOf("fuzz/none"))] }, { any: true }, false);
    case "bad-grpc-timeout":
      return make(kind, { ...base, path: "/etcdserverpb.KV/Range", headers: { "grpc-timeout": rng.pick(BAD_TIMEOUTS) }, chunks: [grpcFrame(rangeOf("fuzz/none"))] }, { any: true }, false);
    case "unknown-path": {
      const path = rng.pick(["/etcdserverpb.KV/Nope", "/nope.Service/Range", "/", "/etcdserverpb.KV", "//", `/${method.service}/${method.name}x`]);
      // grpc-go: a path with no "/" after its leading one is malformed (RESOURCE_EXHAUSTED); any other names an unknown service or method.
      const malformed = !path.slice(1).includes("/");
      return make(kind, { ...base, path, chunks: [grpcFrame(Buffer.alloc(0))] }, { code: malformed ? Code.RESOURCE_EXHAUSTED : Code.UNIMPLEMENTED }, false);
    }
    case "rst-mid-message": {
      const framed = grpcFrame(rng.bytes(rng.between(8, 256)));
      return make(kind, { ...base, chunks: [framed.subarray(0, rng.between(1, framed.length - 1))], resetAfterChunks: true }, { abandoned: true }, false);
    }
    default:
      throw new Error(`unhandled case kind ${String(kind)}`);
  }
}

function splitAt(b: Buffer, at: number): Buffer[] {
  return [b.subarray(0, at), b.subarray(at)];
}

/** An encoded RangeRequest for one key (field 1, bytes): a harmless read. */
export function rangeOf(key: string): Buffer {
  const k = Buffer.from(key);
  if (k.length > 127) throw new Error("rangeOf: key too long for a one-byte length");
  return Buffer.concat([Buffer.from([0x0a, k.length]), k]);
}
