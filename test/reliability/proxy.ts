/**
 * A controllable TCP proxy for one peer link target: it listens where a member advertises its
 * peer URL and forwards to the member's real peer port. Each inbound connection is attributed to
 * a source member by a classifier that reads the first bytes (etcd's rafthttp sends
 * `X-Server-From: <member id>`; etcetera's Hello frame carries `from`), so partitions and one-way
 * drops can be per link although every member dials the same advertised URL.
 *
 * Per direction of a connection: pass, drop (bytes discarded — a blackhole), or delay (bytes held
 * for `ms`, order kept). "forward" is dialer → target, "backward" is target → dialer. A
 * connection that lost bytes is reset when its link heals: after discarding part of a byte
 * stream the framing can no longer be trusted, and a real network would have timed the
 * connection out. `reset()` destroys connections at once (loss of whole connections).
 */
import { createServer, connect, type Server, type Socket } from "node:net";

export type DirectionMode = { kind: "pass" } | { kind: "drop" } | { kind: "delay"; ms: number };

export interface LinkMode {
  /** Dialer → target. */
  forward: DirectionMode;
  /** Target → dialer. */
  backward: DirectionMode;
}

/** The source name of connections the classifier could not attribute (e.g. etcd's probes). */
export const UNKNOWN_SOURCE = "?";

export const PASS: LinkMode = { forward: { kind: "pass" }, backward: { kind: "pass" } };
export const BLACKHOLE: LinkMode = { forward: { kind: "drop" }, backward: { kind: "drop" } };

/**
 * Reads the first bytes of a connection: returns the source's raw id, `null` if it cannot tell,
 * or `undefined` to wait for more bytes.
 */
export type SourceClassifier = (firstBytes: Buffer) => string | null | undefined;

export interface ProxyOptions {
  name: string;
  targetHost?: string;
  targetPort: number;
  listenHost?: string;
  /** 0 (default) lets the kernel choose. */
  listenPort?: number;
  classify?: SourceClassifier;
  /** Bytes to wait for a classification before giving up (source unknown). */
  classifyMaxBytes?: number;
  classifyTimeoutMs?: number;
  /** Bytes a delayed direction may hold before reading from its source pauses. */
  maxQueuedBytes?: number;
  /** How connections are accepted and dialed: plain TCP by default; tls_proxy.ts terminates and re-encrypts TLS. */
  transport?: ProxyTransport;
}

/**
 * The sockets of a proxy. Both sides must hand the proxy plaintext: the classifier and the faults
 * work on the bytes the members exchange, whatever carries them.
 */
export interface ProxyTransport {
  /** A listening server that calls `onSocket` with each accepted connection once its bytes can be read. */
  createServer(onSocket: (client: Socket) => void): Server;
  /** Dials the target for the accepted `client` (TLS: with the protocol the client negotiated). */
  connect(client: Socket, host: string, port: number): Socket;
}

export const TCP_TRANSPORT: ProxyTransport = {
  createServer: (onSocket) => createServer(onSocket),
  connect: (_client, host, port) => connect({ host, port }),
};

export interface ProxyStats {
  accepted: number;
  bytesForwarded: number;
  bytesDropped: number;
  bytesDelayed: number;
  resets: number;
}

type Direction = "forward" | "backward";

/** One direction of one proxied connection. */
class Pipe {
  private readonly queue: Array<{ at: number; buf: Buffer }> = [];
  private queuedBytes = 0;
  private timer: NodeJS.Timeout | undefined;
  private ended = false;
  /** True once this direction discarded bytes. */
  tainted = false;

  constructor(
    private readonly from: Socket,
    private readonly to: Socket,
    private readonly mode: () => DirectionMode,
    private readonly stats: ProxyStats,
    private readonly maxQueuedBytes: number,
  ) {}

  data(chunk: Buffer): void {
    const m = this.mode();
    if (m.kind === "drop") {
      this.stats.bytesDropped += chunk.length;
      this.tainted = true;
      return;
    }
    if (m.kind === "delay" || this.queue.length > 0) {
      // Behind delayed bytes, passing bytes wait their turn: order is never changed.
      const at = Date.now() + (m.kind === "delay" ? m.ms : 0);
      this.queue.push({ at, buf: chunk });
      this.queuedBytes += chunk.length;
      if (m.kind === "delay") this.stats.bytesDelayed += chunk.length;
      if (this.queuedBytes > this.maxQueuedBytes) this.from.pause();
      this.schedule();
      return;
    }
    this.write(chunk);
  }

  end(): void {
    this.ended = true;
    if (this.queue.length === 0) this.to.end();
  }

  stop(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = undefined;
    this.queue.length = 0;
  }

  private write(chunk: Buffer): void {
    if (this.to.destroyed) return;
    this.stats.bytesForwarded += chunk.length;
    if (!this.to.write(chunk)) {
      this.from.pause();
      this.to.once("drain", () => this.from.resume());
    }
  }

  private schedule(): void {
    if (this.timer !== undefined || this.queue.length === 0) return;
    const wait = Math.max(0, this.queue[0]!.at - Date.now());
    this.timer = setTimeout(() => {
      this.timer = undefined;
      const now = Date.now();
      while (this.queue.length > 0 && this.queue[0]!.at <= now) {
        const { buf } = this.queue.shift()!;
        this.queuedBytes -= buf.length;
        this.write(buf);
      }
      if (this.queuedBytes <= this.maxQueuedBytes && this.from.isPaused()) this.from.resume();
      if (this.queue.length === 0 && this.ended) this.to.end();
      this.schedule();
    }, wait);
  }
}

interface ProxiedConnection {
  client: Socket;
  upstream: Socket | undefined;
  source: string | null;
  pipes: Partial<Record<Direction, Pipe>>;
}

export class TcpProxy {
  readonly stats: ProxyStats = { accepted: 0, bytesForwarded: 0, bytesDropped: 0, bytesDelayed: 0, resets: 0 };
  private readonly conns = new Set<ProxiedConnection>();
  private readonly modes = new Map<string, LinkMode>();
  private readonly aliases = new Map<string, string>();
  private defaultMode: LinkMode = PASS;

  private constructor(
    private readonly opts: ProxyOptions,
    private readonly server: Server,
    readonly port: number,
  ) {}

  static async start(opts: ProxyOptions): Promise<TcpProxy> {
    // Connections are handed to the proxy once it exists (none can arrive before it listens).
    const accepting: { proxy?: TcpProxy } = {};
    const server = (opts.transport ?? TCP_TRANSPORT).createServer((s) => (accepting.proxy === undefined ? s.destroy() : accepting.proxy.accept(s)));
    const port = await new Promise<number>((res, rej) => {
      server.once("error", rej);
      server.listen(opts.listenPort ?? 0, opts.listenHost ?? "127.0.0.1", () => {
        const a = server.address();
        if (a === null || typeof a === "string") return rej(new Error("no address"));
        res(a.port);
      });
    });
    const proxy = new TcpProxy(opts, server, port);
    accepting.proxy = proxy;
    return proxy;
  }

  get name(): string {
    return this.opts.name;
  }

  /** Names a raw source id (e.g. a member id in hex → "n2"); modes are keyed by name. */
  setAlias(rawSource: string, name: string): void {
    this.aliases.set(rawSource, name);
  }

  /** Sets the mode for connections from `source` (a name), or the default for all others. */
  setMode(mode: LinkMode, source?: string): void {
    const before = new Map([...this.conns].map((c) => [c, this.modeOf(c)]));
    if (source === undefined) this.defaultMode = mode;
    else this.modes.set(source, mode);
    for (const c of this.conns) {
      const was = before.get(c)!;
      const now = this.modeOf(c);
      for (const d of ["forward", "backward"] as const) {
        if (was[d].kind === "drop" && now[d].kind !== "drop" && c.pipes[d]?.tainted) this.destroy(c);
      }
    }
  }

  /** Back to pass for everyone; connections that lost bytes are reset. */
  heal(): void {
    const sources = [...this.modes.keys()];
    this.setMode(PASS);
    for (const s of sources) this.setMode(PASS, s);
    this.modes.clear();
  }

  /** Destroys current connections (from `source`, or all): the loss of whole connections. */
  reset(source?: string): number {
    let n = 0;
    for (const c of [...this.conns]) {
      if (source === undefined || (this.sourceName(c) ?? UNKNOWN_SOURCE) === source) {
        this.destroy(c);
        n++;
      }
    }
    this.stats.resets += n;
    return n;
  }

  get connectionCount(): number {
    return this.conns.size;
  }

  /** Sources seen on current connections (names after aliases; "?" when unknown). */
  sources(): string[] {
    return [...this.conns].map((c) => this.sourceName(c) ?? UNKNOWN_SOURCE);
  }

  async close(): Promise<void> {
    for (const c of [...this.conns]) this.destroy(c);
    await new Promise<void>((r) => this.server.close(() => r()));
  }

  private sourceName(c: ProxiedConnection): string | null {
    return c.source === null ? null : (this.aliases.get(c.source) ?? c.source);
  }

  /** Connections whose source could not be named use the mode set for source "?" (UNKNOWN_SOURCE). */
  private modeOf(c: ProxiedConnection): LinkMode {
    return this.modes.get(this.sourceName(c) ?? UNKNOWN_SOURCE) ?? this.defaultMode;
  }

  private destroy(c: ProxiedConnection): void {
    c.pipes.forward?.stop();
    c.pipes.backward?.stop();
    c.client.destroy();
    c.upstream?.destroy();
    this.conns.delete(c);
  }

  private accept(client: Socket): void {
    this.stats.accepted++;
    const c: ProxiedConnection = { client, upstream: undefined, source: null, pipes: {} };
    this.conns.add(c);
    client.setNoDelay(true);
    client.on("error", () => this.destroy(c));
    client.on("close", () => this.destroy(c));
    const classify = this.opts.classify;
    if (classify === undefined) {
      this.open(c, Buffer.alloc(0));
      return;
    }
    const maxBytes = this.opts.classifyMaxBytes ?? 4096;
    let head = Buffer.alloc(0);
    let decided = false;
    const decide = (source: string | null) => {
      if (decided) return;
      decided = true;
      clearTimeout(timer);
      client.off("data", onData);
      c.source = source;
      this.open(c, head);
    };
    const timer = setTimeout(() => decide(null), this.opts.classifyTimeoutMs ?? 2_000);
    const onData = (chunk: Buffer) => {
      head = Buffer.concat([head, chunk]);
      const s = classify(head);
      if (s !== undefined) decide(s);
      else if (head.length >= maxBytes) decide(null);
    };
    client.on("data", onData);
    client.on("close", () => clearTimeout(timer));
  }

  /** Connects upstream and starts both pipes; `head` is what the client already sent. */
  private open(c: ProxiedConnection, head: Buffer): void {
    if (!this.conns.has(c)) return;
    const upstream = (this.opts.transport ?? TCP_TRANSPORT).connect(c.client, this.opts.targetHost ?? "127.0.0.1", this.opts.targetPort);
    c.upstream = upstream;
    upstream.setNoDelay(true);
    upstream.on("error", () => this.destroy(c));
    upstream.on("close", () => this.destroy(c));
    const maxQueued = this.opts.maxQueuedBytes ?? 64 * 1024 * 1024;
    const fwd = new Pipe(c.client, upstream, () => this.modeOf(c).forward, this.stats, maxQueued);
    const back = new Pipe(upstream, c.client, () => this.modeOf(c).backward, this.stats, maxQueued);
    c.pipes = { forward: fwd, backward: back };
    if (head.length > 0) fwd.data(head);
    c.client.on("data", (b: Buffer) => fwd.data(b));
    c.client.on("end", () => fwd.end());
    upstream.on("data", (b: Buffer) => back.data(b));
    upstream.on("end", () => back.end());
  }
}

/** etcd rafthttp: every peer request carries `X-Server-From: <member id hex>`. */
export function classifyEtcdHttp(buf: Buffer): string | null | undefined {
  const text = buf.toString("latin1");
  const m = /\r\nX-Server-From: *([0-9a-fA-F]+)\r\n/i.exec(text);
  if (m !== null) return normalizeId(m[1]!);
  return text.includes("\r\n\r\n") ? null : undefined;
}

/** etcetera's peer Hello frame: header(8) kind(1)=Hello magic(4) version(2) kind(1) cluster(8) from(8). */
export function classifyEtcetera(buf: Buffer): string | null | undefined {
  if (buf.length < 32) return undefined;
  if (buf[8] !== 1 || buf.readUInt32BE(9) !== 0x45544354) return null;
  return normalizeId(buf.readBigUInt64BE(24).toString(16));
}

/** Member ids in hex without leading zeros, lower case (etcdctl pads, etcd's headers do not). */
export function normalizeId(hex: string): string {
  return BigInt(`0x${hex}`).toString(16);
}
