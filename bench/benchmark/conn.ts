/**
 * One benchmark "connection": what etcd's benchmark gets from one clientv3.Client — a gRPC
 * channel to every endpoint, requests spread round-robin over them (3.4's balancer). Each
 * channel has its own subchannel pool so that N conns really are N TCP connections (grpc-js
 * otherwise shares one connection between channels with the same target and options).
 *
 * Messages cross this layer as already-encoded Buffers: no (de)serialisation cost here.
 */
import * as grpc from "@grpc/grpc-js";
import { GrpcCallError, H2Endpoint } from "./h2-unary.js";

/**
 * How unary calls travel: "h2" (default) is our lean node:http2 client, "grpc-js" the full
 * @grpc/grpc-js stack. Streams (Watch, LeaseKeepAlive) always use grpc-js.
 */
export type Transport = "h2" | "grpc-js";

const identity = (b: Buffer): Buffer => b;

const CHANNEL_OPTIONS: grpc.ChannelOptions = {
  "grpc.use_local_subchannel_pool": 1,
  "grpc.max_receive_message_length": -1,
  "grpc.max_send_message_length": -1,
};

/** Dial timeout when --dial-timeout is 0 (etcd would block forever; a benchmark should not). */
export const DEFAULT_DIAL_TIMEOUT_MS = 30_000;

/** "http://127.0.0.1:2379" or "127.0.0.1:2379" -> "127.0.0.1:2379". */
export function hostPort(endpoint: string): string {
  return endpoint.replace(/^[a-z]+:\/\//, "").replace(/\/+$/, "");
}

/** Go-like text of a gRPC error, the key of the error distribution. */
export function errorText(e: unknown): string {
  if (e instanceof GrpcCallError) return e.message;
  if (typeof e === "object" && e !== null && "code" in e && typeof (e as grpc.ServiceError).code === "number") {
    const se = e as grpc.ServiceError;
    return `rpc error: code = ${grpc.status[se.code] ?? se.code} desc = ${se.details}`;
  }
  return e instanceof Error ? e.message : String(e);
}

export class Conn {
  private grpcClients: grpc.Client[] | undefined;
  private readonly h2: H2Endpoint[] | undefined;
  private next = 0;
  private nextStream = 0;

  constructor(
    readonly endpoints: readonly string[],
    readonly transport: Transport = "h2",
  ) {
    if (endpoints.length === 0) throw new Error("Conn: no endpoints");
    this.h2 = transport === "h2" ? endpoints.map((e) => new H2Endpoint(hostPort(e))) : undefined;
  }

  private get clients(): grpc.Client[] {
    this.grpcClients ??= this.endpoints.map((e) => new grpc.Client(hostPort(e), grpc.credentials.createInsecure(), CHANNEL_OPTIONS));
    return this.grpcClients;
  }

  /** Resolves when every endpoint is connected; rejects after `timeoutMs` (0 = default). */
  waitReady(timeoutMs: number): Promise<void> {
    const ms = timeoutMs > 0 ? timeoutMs : DEFAULT_DIAL_TIMEOUT_MS;
    if (this.h2 !== undefined) return Promise.all(this.h2.map((h) => h.connect(ms))).then(() => undefined);
    const deadline = Date.now() + ms;
    return Promise.all(
      this.clients.map(
        (c, i) =>
          new Promise<void>((res, rej) =>
            c.waitForReady(deadline, (err) => (err ? rej(new Error(`dial ${this.endpoints[i]}: ${err.message}`)) : res())),
          ),
      ),
    ).then(() => undefined);
  }

  /** One unary call on the next endpoint (round-robin). */
  unary(method: string, request: Buffer): Promise<Buffer> {
    const i = this.next;
    this.next = (i + 1) % this.endpoints.length;
    return this.unaryAt(i, method, request);
  }

  /** A unary call on a given endpoint index (leader discovery, compaction). */
  unaryAt(index: number, method: string, request: Buffer): Promise<Buffer> {
    if (this.h2 !== undefined) {
      const h = this.h2[index];
      if (h === undefined) throw new Error(`Conn: no endpoint #${index}`);
      return h.unary(method, request);
    }
    const client = this.clients[index];
    if (client === undefined) throw new Error(`Conn: no endpoint #${index}`);
    return new Promise((res, rej) => {
      client.makeUnaryRequest(method, identity, identity, request, (err, value) => {
        if (err) rej(err);
        else res(value as Buffer);
      });
    });
  }

  /** A bidirectional stream on the next endpoint (Watch, LeaseKeepAlive), over grpc-js. */
  bidi(method: string): grpc.ClientDuplexStream<Buffer, Buffer> {
    const c = this.clients[this.nextStream] as grpc.Client;
    this.nextStream = (this.nextStream + 1) % this.endpoints.length;
    return c.makeBidiStreamRequest(method, identity, identity);
  }

  close(): void {
    for (const h of this.h2 ?? []) h.close();
    for (const c of this.grpcClients ?? []) c.close();
  }
}
