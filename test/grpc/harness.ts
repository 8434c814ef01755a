/**
 * Shared fixtures of the gRPC conformance tests: the Echo test service (all four
 * method kinds) with handlers that count live invocations and aborts, grpc-js
 * clients built from the protos by @grpc/proto-loader (an independent codec),
 * and a raw node:http2 client for wire-level checks.
 */

import http2 from "node:http2";
import { fileURLToPath } from "node:url";
import * as grpc from "@grpc/grpc-js";
import * as protoLoader from "@grpc/proto-loader";
import { ProtoCodecs } from "../../src/pb/codec.js";
import type { BidiCall, CallContext, ServerReadable, ServerWritable } from "../../src/grpc/handler.js";
import { PROTO_DIR, ETCD_API_FILES } from "../../src/pb/protos.js";
import { GrpcError, type Status } from "../../src/grpc/status.js";

export const FIXTURE_DIR = fileURLToPath(new URL("./fixtures/", import.meta.url));

export interface EchoRequest {
  payload: Buffer;
  count: number;
  delay_ms: number;
  status: number;
  message: string;
  response_bytes: number;
  zigzag: number;
  numbers: number[];
}

export interface EchoResponse {
  payload?: Buffer | Uint8Array | string;
  index?: number;
  metadata?: string;
  received?: number;
  zigzag?: number;
  numbers?: number[];
}

export function loadEchoCodecs(): ProtoCodecs {
  return ProtoCodecs.load({ protoDir: FIXTURE_DIR, files: ["echo.proto"] });
}

/** Counts handler invocations that have not returned yet, and the aborts they saw. */
export class HandlerStats {
  active = 0;
  started = 0;
  aborted = 0;
}

function sleep(ms: number, signal: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal.aborted) {
      reject(signal.reason as Error);
      return;
    }
    const timer = setTimeout(() => {
      signal.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal.reason as Error);
    };
    signal.addEventListener("abort", onAbort, { once: true });
  });
}

function respondTo(req: EchoRequest, ctx: CallContext, index: number): EchoResponse {
  return {
    payload: req.response_bytes > 0 ? Buffer.alloc(req.response_bytes, 0x78) : req.payload,
    index,
    metadata: `${ctx.metadata.get("x-echo") ?? ""}|deadline=${ctx.deadline !== undefined}`,
    zigzag: req.zigzag,
    numbers: req.numbers,
  };
}

async function tracked<T>(stats: HandlerStats, ctx: CallContext, body: () => Promise<T>): Promise<T> {
  stats.active++;
  stats.started++;
  const onAbort = (): void => void stats.aborted++;
  ctx.signal.addEventListener("abort", onAbort, { once: true });
  try {
    return await body();
  } finally {
    ctx.signal.removeEventListener("abort", onAbort);
    stats.active--;
  }
}

/** The Echo service's handlers, with their invocation counts. */
export function echoHandlers(stats: HandlerStats) {
  return {
    Unary: (req: EchoRequest, ctx: CallContext): Promise<EchoResponse> =>
      tracked(stats, ctx, async () => {
        if (req.delay_ms > 0) await sleep(req.delay_ms, ctx.signal);
        if (req.status !== 0) throw new GrpcError(req.status as Status, req.message);
        return respondTo(req, ctx, 0);
      }),
    ServerStream: (req: EchoRequest, call: ServerWritable<EchoResponse>, ctx: CallContext): Promise<void> =>
      tracked(stats, ctx, async () => {
        for (let i = 0; i < req.count; i++) {
          if (ctx.cancelled) return;
          if (req.delay_ms > 0) await sleep(req.delay_ms, ctx.signal);
          if (!call.write(respondTo(req, ctx, i))) await call.drain();
        }
        if (req.status !== 0) throw new GrpcError(req.status as Status, req.message);
      }),
    ClientStream: (call: ServerReadable<EchoRequest>, ctx: CallContext): Promise<EchoResponse> =>
      tracked(stats, ctx, async () => {
        let received = 0;
        let bytes = 0;
        for await (const req of call) {
          received++;
          bytes += req.payload.length;
          if (req.status !== 0) throw new GrpcError(req.status as Status, req.message);
        }
        return { received, index: bytes, metadata: ctx.metadata.get("x-echo") ?? "" };
      }),
    Bidi: (call: BidiCall<EchoRequest, EchoResponse>, ctx: CallContext): Promise<void> =>
      tracked(stats, ctx, async () => {
        let i = 0;
        for await (const req of call) {
          if (req.status !== 0) throw new GrpcError(req.status as Status, req.message);
          if (req.delay_ms > 0) await sleep(req.delay_ms, ctx.signal);
          if (!call.write(respondTo(req, ctx, i++))) await call.drain();
        }
      }),
  };
}

const LOADER_OPTIONS: protoLoader.Options = {
  keepCase: true,
  longs: Number,
  enums: Number,
  defaults: true,
  oneofs: true,
};

type ClientConstructor = new (address: string, credentials: grpc.ChannelCredentials, options?: grpc.ChannelOptions) => grpc.Client;

function lookup(pkg: grpc.GrpcObject, name: string): ClientConstructor {
  let node: unknown = pkg;
  for (const part of name.split(".")) node = (node as Record<string, unknown>)[part];
  return node as ClientConstructor;
}

let echoPackage: grpc.GrpcObject | undefined;
let etcdPackage: grpc.GrpcObject | undefined;

/** A grpc-js client of the Echo service (its own connection unless shared). */
export function echoClient(port: number, options: grpc.ChannelOptions = {}): EchoClient {
  echoPackage ??= grpc.loadPackageDefinition(protoLoader.loadSync("echo.proto", { ...LOADER_OPTIONS, includeDirs: [FIXTURE_DIR] }));
  const Ctor = lookup(echoPackage, "etceteratest.Echo");
  return new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
    ...options,
  }) as unknown as EchoClient;
}

/** A grpc-js client of an etcd service, e.g. "etcdserverpb.KV". */
export function etcdClient(port: number, service: string): grpc.Client & Record<string, (...args: unknown[]) => unknown> {
  etcdPackage ??= grpc.loadPackageDefinition(
    protoLoader.loadSync([...ETCD_API_FILES], { ...LOADER_OPTIONS, includeDirs: [PROTO_DIR] }),
  );
  const Ctor = lookup(etcdPackage, service);
  return new Ctor(`127.0.0.1:${port}`, grpc.credentials.createInsecure(), {
    "grpc.use_local_subchannel_pool": 1,
  }) as grpc.Client & Record<string, (...args: unknown[]) => unknown>;
}

type UnaryFn<Req, Res> = (
  req: Partial<Req>,
  metadata: grpc.Metadata,
  options: grpc.CallOptions,
  cb: (err: grpc.ServiceError | null, res: Res) => void,
) => grpc.ClientUnaryCall;

export interface EchoClient extends grpc.Client {
  Unary: UnaryFn<EchoRequest, Required<EchoResponse>>;
  ServerStream(req: Partial<EchoRequest>, metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientReadableStream<Required<EchoResponse>>;
  ClientStream(
    metadata: grpc.Metadata,
    options: grpc.CallOptions,
    cb: (err: grpc.ServiceError | null, res: Required<EchoResponse>) => void,
  ): grpc.ClientWritableStream<Partial<EchoRequest>>;
  Bidi(metadata?: grpc.Metadata, options?: grpc.CallOptions): grpc.ClientDuplexStream<Partial<EchoRequest>, Required<EchoResponse>>;
}

/** Promise form of a unary call. */
export function unary<Res>(
  fn: (req: object, md: grpc.Metadata, opts: grpc.CallOptions, cb: (err: grpc.ServiceError | null, res: Res) => void) => unknown,
  client: grpc.Client,
  req: object,
  options: grpc.CallOptions = {},
  metadata = new grpc.Metadata(),
): Promise<Res> {
  return new Promise((resolve, reject) => {
    fn.call(client, req, metadata, options, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

/** Collects a client stream's messages and its final status. */
export function collect<T>(stream: grpc.ClientReadableStream<T> | grpc.ClientDuplexStream<unknown, T>): Promise<{ messages: T[]; error?: grpc.ServiceError }> {
  return new Promise((resolve) => {
    const messages: T[] = [];
    stream.on("data", (m: T) => messages.push(m));
    stream.on("error", (error: grpc.ServiceError) => resolve({ messages, error }));
    stream.on("end", () => resolve({ messages }));
  });
}

/** Waits until `check` holds, polling (no wall-clock assertions: the test timeout bounds it). */
export async function eventually(check: () => boolean, what: string, timeoutMs = 20_000): Promise<void> {
  const until = Date.now() + timeoutMs;
  while (!check()) {
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

export interface RawResponse {
  headers: http2.IncomingHttpHeaders;
  trailers: http2.IncomingHttpHeaders | undefined;
  body: Buffer;
  /** Frames (DATA chunks) as received. */
  rstCode: number | undefined;
}

/** One raw HTTP/2 request: headers, then each chunk as its own DATA write, then END_STREAM. */
export function rawRequest(
  session: http2.ClientHttp2Session,
  headers: http2.OutgoingHttpHeaders,
  chunks: Buffer[],
  endStream = true,
): Promise<RawResponse> {
  return new Promise((resolve, reject) => {
    const req = session.request({ ":method": "POST", "content-type": "application/grpc", te: "trailers", ...headers });
    let responseHeaders: http2.IncomingHttpHeaders = {};
    let trailers: http2.IncomingHttpHeaders | undefined;
    const body: Buffer[] = [];
    req.on("response", (h) => (responseHeaders = h));
    req.on("trailers", (t) => (trailers = t));
    req.on("data", (d: Buffer) => body.push(d));
    req.on("error", () => {});
    req.on("close", () => resolve({ headers: responseHeaders, trailers, body: Buffer.concat(body), rstCode: req.rstCode }));
    req.on("aborted", () => {});
    void reject;
    const writeNext = (i: number): void => {
      if (i === chunks.length) {
        if (endStream) req.end();
        return;
      }
      req.write(chunks[i], () => setImmediate(() => writeNext(i + 1)));
    };
    writeNext(0);
  });
}

/** Prefixes a message for the wire (flag byte, big-endian length). */
export function frame(message: Buffer, compressed = false): Buffer {
  const out = Buffer.alloc(5 + message.length);
  out[0] = compressed ? 1 : 0;
  out.writeUInt32BE(message.length, 1);
  message.copy(out, 5);
  return out;
}

/** The seed of a randomized test (test/seed.ts). */
export { testSeed as seedFor } from "../seed.js";

/**
 * Connections the AuthorityRewriter serves for `n` connections with a bad :authority: node:http2's
 * engine needs it, ours takes any authority as it comes (src/grpc/h2/connection.ts).
 */
export function rewritesOn(server: { readonly http2Engine: string }, n: number): number {
  return server.http2Engine === "node" ? n : 0;
}
