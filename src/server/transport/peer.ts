/**
 * The outgoing stream to one peer (etcd's rafthttp streamWriter): one persistent TCP connection,
 * a bounded queue of messages, and a flush that writes everything queued as Messages frames in
 * one corked write. The connection is re-dialed with exponential backoff when it breaks.
 *
 * An idle stream sends a link heartbeat (an empty Messages frame, as etcd's linkHeartbeatMessage)
 * every third of the read timeout, so the peer hears from us even when Raft has nothing to say to
 * it (a follower to another follower): the transport there resets a stream to a peer it stopped
 * hearing from (etcd's ConnReadTimeout), which is how a dead or hung peer becomes inactive.
 *
 * Messages are accepted only while the stream is active: a message queued for a dead peer would
 * be stale by the time it arrives, and Raft resends what matters. A refused message makes the
 * transport report the peer unreachable, which moves Raft's progress for it to probing.
 */
import type * as net from "node:net";
import type { Message, NodeId } from "../../raft/types.js";
import { formatId } from "../member.js";
import { encodedMessageBytes } from "./codec.js";
import type { TransportContext } from "./context.js";
import { dialPeer, HandshakeRejectedError } from "./dial.js";
import { encodeMessages, messagesFrameBytes } from "./protocol.js";

/** etcd's linkHeartbeatMessage: a frame that carries nothing but that we are alive. */
const LINK_HEARTBEAT = encodeMessages([]);
import { ConnectionKind, RejectReason } from "./protocol.js";
import { peerUrlToAddress } from "./url.js";

type StreamState = "connecting" | "active" | "backoff" | "stopped";

/** The output buffer kept across flushes: at least this large, and none for a flush above the max. */
const OUTPUT_BYTES_MIN = 64 * 1024;
const OUTPUT_BYTES_MAX = 1024 * 1024;

/** Why `enqueue` refused a message. */
export type DropReason = "inactive" | "queue full" | "too large";

/** Counters of one outgoing stream since it was created. */
export interface PeerStreamStats {
  /** Flushes that wrote something: each is one corked socket write. */
  flushes: number;
  framesSent: number;
  messagesSent: number;
  messagesDropped: number;
}

export interface PeerStreamHooks {
  /** The stream became active or inactive (inactive also means: report unreachable). */
  onActiveChange(id: NodeId, active: boolean): void;
  /** The peer refused us because the cluster removed this member (etcd's 410 Gone). */
  onRemoved?(): void;
}

export class PeerStream {
  private state: StreamState = "connecting";
  private socket: net.Socket | undefined;
  private queue: Message[] = [];
  private queueSizes: number[] = [];
  private queueBytes = 0;
  private urlIndex = 0;
  private backoffMs: number;
  private reconnectTimer: NodeJS.Timeout | undefined;
  private stallTimer: NodeJS.Timeout | undefined;
  private heartbeatTimer: NodeJS.Timeout | undefined;
  /** Whether anything was written since the last heartbeat tick. */
  private sentSinceTick = false;
  private readonly dialAbort = new AbortController();
  private lastLoggedError = "";
  private activeSinceMs: number | undefined;
  readonly stats: PeerStreamStats = { flushes: 0, framesSent: 0, messagesSent: 0, messagesDropped: 0 };
  private readonly peerLabel: string;
  private readonly localLabel: string;
  /** The flushes' output buffer (outputBuffer). */
  private output: Buffer | undefined;

  constructor(
    readonly id: NodeId,
    private urls: readonly string[],
    private readonly ctx: TransportContext,
    private readonly hooks: PeerStreamHooks,
  ) {
    if (urls.length === 0) throw new Error(`peer ${formatId(id)} has no URLs`);
    for (const u of urls) peerUrlToAddress(u); // fail fast on unusable URLs
    this.backoffMs = ctx.limits.backoffInitialMs;
    this.peerLabel = formatId(id);
    this.localLabel = formatId(ctx.localId);
    this.connect();
  }

  isActive(): boolean {
    return this.state === "active";
  }

  /** When (performance.now() ms) the stream became active; undefined while it is not (etcd's ActiveSince). */
  activeSince(): number | undefined {
    return this.activeSinceMs;
  }

  peerUrls(): readonly string[] {
    return this.urls;
  }

  /** The URL the stream uses (or will try next): the best bet for a snapshot connection too. */
  currentUrl(): string {
    return this.urls[this.urlIndex % this.urls.length]!;
  }

  /** Queues `m` for the next flush, or says why not. */
  enqueue(m: Message): DropReason | undefined {
    const reason = this.admit(m);
    if (reason !== undefined) this.stats.messagesDropped++;
    return reason;
  }

  private admit(m: Message): DropReason | undefined {
    if (this.state !== "active") return "inactive";
    const size = encodedMessageBytes(m);
    if (messagesFrameBytes(size) > this.ctx.limits.maxFrameBytes) return "too large";
    if (this.queue.length >= this.ctx.limits.maxQueueMessages || this.queueBytes + size > this.ctx.limits.maxQueueBytes) {
      return "queue full";
    }
    this.queue.push(m);
    this.queueSizes.push(size);
    this.queueBytes += size;
    return undefined;
  }

  hasQueued(): boolean {
    return this.queue.length > 0;
  }

  /**
   * Writes the queue as few frames as the frame limit allows, in one corked write. Stops while
   * the socket's backlog is above the high-water mark; 'drain' resumes it.
   */
  flush(): void {
    const socket = this.socket;
    if (this.state !== "active" || socket === undefined || this.queue.length === 0) return;
    if (socket.writableLength > this.ctx.limits.socketHighWaterBytes) return;
    const maxPayload = this.ctx.limits.maxFrameBytes - messagesFrameBytes(0);
    // Where each frame ends in the queue, and the bytes of all of them.
    const ends: number[] = [];
    let allBytes = 0;
    for (let start = 0; start < this.queue.length; ) {
      let end = start;
      let bytes = 0;
      while (end < this.queue.length && (end === start || bytes + this.queueSizes[end]! <= maxPayload)) {
        bytes += this.queueSizes[end]!;
        end++;
      }
      ends.push(end);
      allBytes += messagesFrameBytes(bytes);
      start = end;
    }
    const out = this.outputBuffer(allBytes);
    let sentBytes = 0;
    socket.cork();
    let start = 0;
    for (const end of ends) {
      const whole = start === 0 && end === this.queue.length;
      const msgs = whole ? this.queue : this.queue.slice(start, end);
      const sizes = whole ? this.queueSizes : this.queueSizes.slice(start, end);
      const frame = encodeMessages(msgs, sizes, out?.subarray(sentBytes));
      socket.write(frame);
      sentBytes += frame.byteLength;
      this.stats.framesSent++;
      start = end;
    }
    socket.uncork();
    // Written through at once (the usual case), the buffer is ours again; else the socket holds
    // views of it until they are sent, and the next flush takes a new one.
    if (out !== undefined && socket.writableLength !== 0) this.output = undefined;
    this.sentSinceTick = true;
    this.stats.flushes++;
    this.stats.messagesSent += this.queue.length;
    this.queue = [];
    this.queueSizes = [];
    this.queueBytes = 0;
    this.ctx.metrics.sentBytes.inc({ To: this.peerLabel }, sentBytes);
  }

  /**
   * The buffer a flush of `bytes` encodes its frames into: one kept across flushes, so a Ready's
   * append (~60 KB at 200 puts per fsync) is not a fresh allocation per follower whose pages fault
   * in as it is written (issue 18: page faults were ~6% of the leader's main thread under put
   * load). Undefined past OUTPUT_BYTES_MAX: such a flush allocates its frames as before.
   */
  private outputBuffer(bytes: number): Buffer | undefined {
    if (bytes > OUTPUT_BYTES_MAX) return undefined;
    if (this.output === undefined || this.output.length < bytes) this.output = Buffer.allocUnsafeSlow(Math.max(bytes, OUTPUT_BYTES_MIN));
    return this.output;
  }

  /** New URLs (a member update): reconnect if the current one is no longer listed. */
  updateUrls(urls: readonly string[]): void {
    if (urls.length === 0) throw new Error(`peer ${this.peerLabel} has no URLs`);
    for (const u of urls) peerUrlToAddress(u);
    const current = this.urls[this.urlIndex % this.urls.length];
    this.urls = urls;
    this.urlIndex = 0;
    if (current !== undefined && !urls.includes(current)) this.socket?.destroy();
  }

  /**
   * Drops the connection (it is re-dialed with backoff): the transport heard nothing from the
   * peer for the read timeout. Nothing happens when the stream is not active.
   */
  reset(reason: string): void {
    if (this.state !== "active" || this.socket === undefined) return;
    this.ctx.logger.warn({ "local-member-id": this.localLabel, "remote-peer-id": this.peerLabel, reason }, "resetting stream to peer");
    this.socket.destroy();
  }

  /**
   * The peer dialed us (its stream to us is up): it is back, so a stream waiting out its backoff
   * dials now instead of after up to backoffMaxMs. A restarted follower otherwise waited that long
   * to hear from the leader (measured 1.1-1.6 s of a 1.7 s rejoin); etcd's peer there learns at
   * once, because the restarted member dials the leader's stream itself.
   */
  redialNow(): void {
    if (this.state !== "backoff") return;
    clearTimeout(this.reconnectTimer);
    this.backoffMs = this.ctx.limits.backoffInitialMs;
    this.connect();
  }

  stop(): void {
    this.state = "stopped";
    this.dialAbort.abort();
    clearTimeout(this.reconnectTimer);
    clearInterval(this.stallTimer);
    clearInterval(this.heartbeatTimer);
    // onClosed ignores the socket once it is no longer ours: the gauge is settled here (a peer
    // removed and added again, as the bootstrap conf changes do, counted twice before).
    if (this.socket !== undefined) this.ctx.metrics.activePeers.dec({ Local: this.localLabel, Remote: this.peerLabel });
    this.socket?.destroy();
    this.socket = undefined;
    this.activeSinceMs = undefined;
    this.queue = [];
    this.queueSizes = [];
    this.queueBytes = 0;
  }

  private connect(): void {
    this.state = "connecting";
    const url = this.currentUrl();
    dialPeer(this.ctx, this.id, peerUrlToAddress(url), ConnectionKind.Stream, this.dialAbort.signal).then(
      ({ socket }) => this.onEstablished(socket, url),
      (err: Error) => this.onDialFailed(err, url),
    );
  }

  private onEstablished(socket: net.Socket, url: string): void {
    if (this.state === "stopped") {
      socket.destroy();
      return;
    }
    this.socket = socket;
    this.state = "active";
    this.activeSinceMs = performance.now();
    this.backoffMs = this.ctx.limits.backoffInitialMs;
    this.lastLoggedError = "";
    socket.setKeepAlive(true, 5_000);
    // The listener sends nothing on a stream after HelloOk: anything else is a protocol error.
    socket.on("data", () => socket.destroy(new Error("unexpected data from peer on an outgoing stream")));
    socket.on("drain", () => this.flush());
    socket.on("error", (err) => this.logFailure(err, url));
    socket.on("close", () => this.onClosed(socket));
    socket.resume();
    this.watchForStall(socket);
    this.sendHeartbeats(socket);
    this.ctx.metrics.activePeers.inc({ Local: this.localLabel, Remote: this.peerLabel });
    this.ctx.logger.info({ "local-member-id": this.localLabel, "remote-peer-id": this.peerLabel, "remote-peer-url": url }, "peer became active");
    this.hooks.onActiveChange(this.id, true);
  }

  /**
   * A peer that stops reading (hung process, blackholing network) leaves the socket open with a
   * growing backlog; TCP keepalive would take minutes to notice. Close the stream when unsent
   * bytes make no progress for streamStallTimeoutMs, so the peer is reported unreachable.
   */
  private watchForStall(socket: net.Socket): void {
    const checkMs = Math.max(1, Math.floor(this.ctx.limits.streamStallTimeoutMs / 4));
    let lastWritten = socket.bytesWritten;
    let stalledSinceMs: number | undefined;
    this.stallTimer = setInterval(() => {
      const written = socket.bytesWritten;
      if (socket.writableLength === 0 || written !== lastWritten) {
        lastWritten = written;
        stalledSinceMs = undefined;
        return;
      }
      const nowMs = performance.now();
      stalledSinceMs ??= nowMs;
      if (nowMs - stalledSinceMs >= this.ctx.limits.streamStallTimeoutMs) socket.destroy(new Error("peer stream stalled: the peer stopped reading"));
    }, checkMs);
    this.stallTimer.unref();
  }

  /** A link heartbeat whenever a third of the read timeout passed with nothing written. */
  private sendHeartbeats(socket: net.Socket): void {
    this.sentSinceTick = false;
    this.heartbeatTimer = setInterval(
      () => {
        if (!this.sentSinceTick && socket.writableLength === 0) socket.write(LINK_HEARTBEAT);
        this.sentSinceTick = false;
      },
      Math.max(1, Math.floor(this.ctx.limits.streamReadTimeoutMs / 3)),
    );
    this.heartbeatTimer.unref();
  }

  private onClosed(socket: net.Socket): void {
    if (socket !== this.socket) return;
    clearInterval(this.stallTimer);
    clearInterval(this.heartbeatTimer);
    this.socket = undefined;
    // Inactive: etcd's ActiveSince is zero until the stream is up again (the strict reconfig
    // check counts a dead peer out of the quorum by this).
    this.activeSinceMs = undefined;
    this.queue = [];
    this.queueSizes = [];
    this.queueBytes = 0;
    this.ctx.metrics.activePeers.dec({ Local: this.localLabel, Remote: this.peerLabel });
    this.ctx.metrics.disconnectedPeers.inc({ Local: this.localLabel, Remote: this.peerLabel });
    if (this.state === "stopped") return;
    this.ctx.logger.info({ "local-member-id": this.localLabel, "remote-peer-id": this.peerLabel }, "peer became inactive (message send to peer failed)");
    this.hooks.onActiveChange(this.id, false);
    this.scheduleReconnect();
  }

  private onDialFailed(err: Error, url: string): void {
    if (this.state === "stopped") return;
    this.ctx.metrics.sentFailures.inc({ To: this.peerLabel });
    this.logFailure(err, url);
    if (err instanceof HandshakeRejectedError && err.reason === RejectReason.MemberRemoved) this.hooks.onRemoved?.();
    this.urlIndex++;
    this.scheduleReconnect();
  }

  /** Logs a connection problem once per distinct error, so a down peer does not flood the log. */
  private logFailure(err: Error, url: string): void {
    const text = err.message;
    if (text === this.lastLoggedError) return;
    this.lastLoggedError = text;
    const fields = { "local-member-id": this.localLabel, "remote-peer-id": this.peerLabel, "remote-peer-url": url, error: text };
    if (err instanceof HandshakeRejectedError) this.ctx.logger.error(fields, "peer refused the connection");
    else this.ctx.logger.warn(fields, "failed to connect to peer");
  }

  private scheduleReconnect(): void {
    this.state = "backoff";
    const jitter = 0.75 + Math.random() * 0.5;
    const delayMs = Math.round(this.backoffMs * jitter);
    this.backoffMs = Math.min(this.backoffMs * 2, this.ctx.limits.backoffMaxMs);
    this.reconnectTimer = setTimeout(() => {
      if (this.state === "backoff") this.connect();
    }, delayMs);
  }
}
