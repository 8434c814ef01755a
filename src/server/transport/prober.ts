/**
 * Peer round-trip time, measured as etcd's rafthttp prober does: every few seconds each peer is
 * asked something tiny on its peer port and the answer's delay observed into
 * etcd_network_peer_round_trip_time_seconds{To} (etcd: GET /raft/probing every 4 s). Here the
 * question is a Hello of kind Probe on a fresh connection; the listener answers HelloOk and closes.
 * The time measured runs from the TCP connection being up to the HelloOk: one request/response
 * round trip, the TCP handshake excluded (etcd reuses a keep-alive connection for the same effect).
 *
 * etcd observes a smoothed RTT every 30 s; this observes each probe, so the histogram fills from
 * the first seconds of a member's life. A failed probe observes nothing (as etcd's), its failure
 * shows in the peer's stream state and etcd_network_peer_sent_failures_total instead.
 */
import { Histogram, type Registry } from "prom-client";
import type { NodeId } from "../../raft/types.js";
import { formatId } from "../member.js";
import type { TransportContext } from "./context.js";
import { FrameDecoder, FrameKind } from "./frame.js";
import { ConnectionKind, decodeHelloOk, encodeHello, PROTOCOL_VERSION } from "./protocol.js";
import { peerUrlToAddress } from "./url.js";
import { connectedEvent, connectSocket } from "./dial.js";

/** etcd's proberInterval (ConnReadTimeout - 1 s). */
export const PROBE_INTERVAL_MS = 4_000;
/** A probe not answered in this time counts as failed. */
const PROBE_TIMEOUT_MS = 5_000;

/** etcd's prometheus.ExponentialBuckets(0.0001, 2, 16): 100 µs … 3.2768 s. */
const RTT_BUCKETS = Array.from({ length: 16 }, (_, i) => 0.0001 * 2 ** i);

const byRegistry = new WeakMap<Registry, Histogram<"To">>();

export function rttHistogram(registry: Registry): Histogram<"To"> {
  let h = byRegistry.get(registry);
  if (h === undefined) {
    h = new Histogram({ name: "etcd_network_peer_round_trip_time_seconds", help: "Round-Trip-Time histogram between peers", labelNames: ["To"], buckets: RTT_BUCKETS, registers: [registry] });
    byRegistry.set(registry, h);
  }
  return h;
}

/** One probe of `url`: resolves with the round trip in seconds, rejects when it fails. */
export function probeOnce(ctx: TransportContext, to: NodeId, url: string, timeoutMs = PROBE_TIMEOUT_MS): Promise<number> {
  return new Promise((resolve, reject) => {
    const address = peerUrlToAddress(url);
    const socket = connectSocket(ctx.tls, address);
    socket.setNoDelay(true);
    const decoder = new FrameDecoder(ctx.limits.maxHelloBytes);
    let sentAtMs = 0;
    const finish = (err: Error | undefined, seconds = 0): void => {
      clearTimeout(timer);
      socket.removeAllListeners("data");
      socket.destroy();
      if (err !== undefined) reject(err);
      else resolve(seconds);
    };
    const timer = setTimeout(() => finish(new Error(`probe of ${url} timed out`)), timeoutMs);
    socket.once(connectedEvent(socket), () => {
      sentAtMs = performance.now();
      socket.write(encodeHello({ version: PROTOCOL_VERSION, kind: ConnectionKind.Probe, clusterId: ctx.clusterId, from: ctx.localId, to, clusterToken: ctx.clusterToken }));
    });
    socket.on("error", (e) => finish(e));
    socket.once("close", () => finish(new Error(`probe of ${url}: connection closed before the answer`)));
    socket.on("data", (chunk: Buffer) => {
      try {
        const frame = decoder.push(chunk)[0];
        if (frame === undefined) return;
        if (frame.kind !== FrameKind.HelloOk) throw new Error(`probe of ${url} answered ${FrameKind[frame.kind] ?? frame.kind}`);
        if (decodeHelloOk(frame.payload) !== to) throw new Error(`probe of ${url}: another member answered`);
        finish(undefined, (performance.now() - sentAtMs) / 1000);
      } catch (e) {
        finish(e as Error);
      }
    });
  });
}

export interface ProberHooks {
  /** The peers to probe now, with the URL to use for each. */
  targets(): Iterable<[NodeId, string]>;
}

/** Probes every peer every PROBE_INTERVAL_MS, one probe per peer at a time. */
export class Prober {
  private timer: NodeJS.Timeout | undefined;
  private readonly inFlight = new Set<NodeId>();
  private stopped = false;

  constructor(
    private readonly ctx: TransportContext,
    private readonly rtt: Histogram<"To">,
    private readonly hooks: ProberHooks,
    private readonly intervalMs = PROBE_INTERVAL_MS,
  ) {}

  start(): void {
    // The first round soon after start, so a new member's histogram is not empty for long.
    this.timer = setTimeout(() => this.round(), Math.min(1_000, this.intervalMs));
    this.timer.unref();
  }

  stop(): void {
    this.stopped = true;
    clearTimeout(this.timer);
  }

  private round(): void {
    if (this.stopped) return;
    for (const [id, url] of this.hooks.targets()) {
      if (this.inFlight.has(id)) continue;
      this.inFlight.add(id);
      probeOnce(this.ctx, id, url).then(
        (seconds) => {
          if (!this.stopped) this.rtt.observe({ To: formatId(id) }, seconds);
        },
        (err: Error) => this.ctx.logger.debug({ "remote-peer-id": formatId(id), error: err.message }, "peer probe failed"),
      ).finally(() => this.inFlight.delete(id));
    }
    this.timer = setTimeout(() => this.round(), this.intervalMs);
    this.timer.unref();
  }
}
