/**
 * gRPC keepalive for server connections, with etcd's flags and defaults:
 * the server pings an idle client every --grpc-keepalive-interval (2h) and
 * drops the connection if no ack comes within --grpc-keepalive-timeout (20s);
 * clients pinging more often than --grpc-keepalive-min-time (5s) collect strikes
 * and, past two, get GOAWAY ENHANCE_YOUR_CALM "too_many_pings" (grpc-go's policy;
 * etcd sets PermitWithoutStream=false, so with no open stream the bound is 2h).
 */

import http2, { type ServerHttp2Session } from "node:http2";

export interface KeepaliveOptions {
  /** Server-to-client ping interval on an idle connection (0 disables). */
  intervalMs: number;
  /** How long to wait for a ping ack before closing the connection. */
  timeoutMs: number;
  /** Minimum interval a client must keep between its pings. */
  minTimeMs: number;
  /** Whether clients may ping while no stream is open. */
  permitWithoutStream: boolean;
}

export const DEFAULT_KEEPALIVE: KeepaliveOptions = {
  intervalMs: 2 * 60 * 60 * 1000,
  timeoutMs: 20 * 1000,
  minTimeMs: 5 * 1000,
  permitWithoutStream: false,
};

/** grpc-go's bound for pings with no active stream when they are not permitted. */
const IDLE_PING_MS_MIN = 2 * 60 * 60 * 1000;
const PING_STRIKES_MAX = 2;

/**
 * grpc-go's policy on client pings: one closer than the minimum interval to
 * the previous is a strike, unless streams were opened in between; past two
 * strikes the client gets GOAWAY too_many_pings. Shared by SessionKeepalive
 * and the first-request gate, which answers pings before nghttp2 owns the
 * connection.
 */
export class PingStrikes {
  private lastPingMs = 0;
  private strikes = 0;

  constructor(private readonly options: Pick<KeepaliveOptions, "minTimeMs" | "permitWithoutStream">) {}

  /** Records a client ping; true when the client has now pinged too often. */
  onPing(nowMs: number, streamsSinceLastPing: number, openStreams: number): boolean {
    const last = this.lastPingMs;
    this.lastPingMs = nowMs;
    if (streamsSinceLastPing > 0) {
      // Like grpc-go resetting strikes when it sends data: the connection is in use.
      this.strikes = 0;
      return false;
    }
    const minMs = openStreams < 1 && !this.options.permitWithoutStream ? IDLE_PING_MS_MIN : this.options.minTimeMs;
    if (last !== 0 && nowMs - last < minMs) this.strikes++;
    return this.strikes > PING_STRIKES_MAX;
  }
}

/** GOAWAY debug data grpc-go sends with ENHANCE_YOUR_CALM to a client pinging too often. */
export const TOO_MANY_PINGS = "too_many_pings";

/** Keepalive state of one connection. */
export class SessionKeepalive {
  private readonly session: ServerHttp2Session;
  private readonly options: KeepaliveOptions;
  private pingTimer: NodeJS.Timeout | undefined;
  private ackTimer: NodeJS.Timeout | undefined;
  private readonly strikes: PingStrikes;
  /** Streams opened since the last ping: activity resets strikes and idleness. */
  private streamsSeen = 0;
  /** gRPC calls open on this connection. */
  private openStreams = 0;

  constructor(session: ServerHttp2Session, options: KeepaliveOptions) {
    this.session = session;
    this.options = options;
    this.strikes = new PingStrikes(options);
    session.on("ping", () => this.onClientPing());
    if (options.intervalMs > 0) {
      this.pingTimer = setInterval(() => this.onInterval(), options.intervalMs);
      this.pingTimer.unref();
    }
    session.once("close", () => this.stop());
  }

  streamOpened(): void {
    this.streamsSeen++;
    this.openStreams++;
  }

  streamClosed(): void {
    this.openStreams--;
  }

  private onClientPing(): void {
    const tooMany = this.strikes.onPing(Date.now(), this.streamsSeen, this.openStreams);
    this.streamsSeen = 0;
    if (tooMany) {
      this.session.goaway(http2.constants.NGHTTP2_ENHANCE_YOUR_CALM, 0, Buffer.from(TOO_MANY_PINGS));
      this.session.close();
      this.stop();
    }
  }

  private onInterval(): void {
    if (this.streamsSeen > 0 || this.ackTimer || this.session.destroyed) {
      this.streamsSeen = 0;
      return;
    }
    this.ackTimer = setTimeout(() => this.session.destroy(), this.options.timeoutMs);
    this.ackTimer.unref();
    try {
      this.session.ping((err) => {
        clearTimeout(this.ackTimer);
        this.ackTimer = undefined;
        if (err && !this.session.destroyed) this.session.destroy();
      });
    } catch {
      this.session.destroy();
    }
  }

  stop(): void {
    clearInterval(this.pingTimer);
    clearTimeout(this.ackTimer);
    this.pingTimer = undefined;
    this.ackTimer = undefined;
  }
}
