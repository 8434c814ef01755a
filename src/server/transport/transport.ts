/**
 * The peer transport (etcd's rafthttp.Transport): carries Raft messages between members.
 *
 * Why raw TCP (node:net) rather than HTTP/2: one long-lived byte stream per direction per peer is
 * all Raft needs; framing it ourselves keeps the hot path to one corked write per flush, makes
 * every bound explicit (frame size, queue, backlog), and leaves a plain TCP stream that the
 * reliability suite's TCP fault-injection proxy can delay, cut or blackhole without speaking any
 * protocol. Snapshots use a connection of their own so they never hold up heartbeats.
 *
 * Threading of callbacks: `send` never calls back synchronously. `onUnreachable` and
 * `onSnapshotStatus` run from timers/socket events, so the node loop may call into Raft from them.
 * `onMessage` runs from socket events, one call per message, in arrival order per peer.
 */
import * as net from "node:net";
import * as tls from "node:tls";
import type { Logger } from "pino";
import { Registry } from "prom-client";
import { type Message, MessageType, type NodeId } from "../../raft/types.js";
import { formatId } from "../member.js";
import { DEFAULT_LIMITS, type TransportContext, type TransportLimits } from "./context.js";
import { serveInbound } from "./inbound.js";
import { transportMetrics } from "./metrics.js";
import { type DropReason, PeerStream, type PeerStreamStats } from "./peer.js";
import { Prober, rttHistogram } from "./prober.js";
import { memorySnapshotBody, type SnapshotBody } from "./snapshot_body.js";
import { type SnapshotSend, sendSnapshot } from "./snapshot_sender.js";
import { requestSnapshotBase } from "./snapshot_base.js";
import type { SnapshotBase } from "../snapshot_delta_format.js";
import { memorySnapshotSink, type SnapshotSinkFactory } from "./snapshot_sink.js";
import type { MembersInfo } from "./protocol.js";
import type { PeerTransportTls } from "./tls_context.js";
import { peerUrlToAddress, type TcpAddress } from "./url.js";

export type { TransportLimits } from "./context.js";
export { DEFAULT_LIMITS } from "./context.js";
export type { PeerStreamStats } from "./peer.js";
export type { SnapshotBody } from "./snapshot_body.js";
export type { SnapshotSink, SnapshotSinkFactory } from "./snapshot_sink.js";

export interface TransportOptions {
  localId: NodeId;
  clusterId: NodeId;
  /** --initial-cluster-token; sent in the handshake and logged on a mismatch (the id decides). */
  clusterToken?: string;
  /** --listen-peer-urls (http://host:port; port 0 picks a free port, see listenAddresses()). */
  listenUrls: readonly string[];
  /** The other members and their peer URLs. The local member must not be listed. */
  peers?: ReadonlyMap<NodeId, readonly string[]>;
  /** A Raft message for this member arrived. */
  onMessage(m: Message): void;
  /** A message to `id` could not be sent (peer down or overloaded): etcd's ReportUnreachable. */
  onUnreachable(id: NodeId): void;
  /** A MsgSnap to `id` was delivered (failed=false) or not: etcd's ReportSnapshot/MsgSnapStatus. */
  onSnapshotStatus(id: NodeId, failed: boolean): void;
  /** Members the cluster removed: their connections are refused so they stop. */
  isRemovedPeer?(id: NodeId): boolean;
  /** The answer to a joining member's "members" connection (etcd's GET /members). */
  membersInfo?(): MembersInfo;
  /** A peer refused this member because the cluster removed it. */
  onRemoved?(): void;
  /** Optional: the outgoing stream to `id` became active or inactive. */
  onPeerActive?(id: NodeId, active: boolean): void;
  logger: Logger;
  /** Where the etcd_network_* metrics go; a private registry when not given. */
  registry?: Registry;
  limits?: Partial<TransportLimits>;
  /** Peer TLS for https:// listen and peer URLs (src/server/tls/peer_tls.ts). */
  tls?: PeerTransportTls;
  /**
   * Where incoming snapshots are written as they arrive (a member: a temporary file beside its
   * backend). Without one they are reassembled in memory, within limits.maxInboundSnapshotBytes.
   */
  snapshotSink?: SnapshotSinkFactory;
  /** This member's backend as the base of an incremental snapshot, answered to a leader's base request (absent: none offered). */
  snapshotBase?(from: NodeId): SnapshotBase | undefined;
}

/** How often a drop is logged per peer at most (the counter metrics count every one). */
const DROP_LOG_INTERVAL_MS = 1_000;

export class Transport {
  private readonly ctx: TransportContext;
  private readonly peers = new Map<NodeId, PeerStream>();
  private readonly inboundStreams = new Map<NodeId, net.Socket>();
  private readonly inboundSockets = new Set<net.Socket>();
  private readonly snapshotSends = new Map<NodeId, SnapshotSend>();
  private readonly servers: net.Server[] = [];
  private readonly pendingUnreachable = new Set<NodeId>();
  private readonly lastDropLogMs = new Map<NodeId, number>();
  /** When (performance.now() ms) a byte last came on each peer's stream to us. */
  private readonly lastHeardMs = new Map<NodeId, number>();
  private livenessTimer: NodeJS.Timeout | undefined;
  private inboundSnapshotBytes = 0;
  private readonly prober: Prober;
  private flushScheduled = false;
  private started = false;
  private stopped = false;

  constructor(private readonly options: TransportOptions) {
    if (typeof options.localId !== "bigint" || options.localId <= 0n) throw new Error(`invalid local member id ${String(options.localId)}`);
    const limits = { ...DEFAULT_LIMITS, ...options.limits };
    this.ctx = {
      localId: options.localId,
      clusterId: options.clusterId,
      clusterToken: options.clusterToken ?? "",
      logger: options.logger,
      metrics: transportMetrics(options.registry ?? new Registry()),
      limits,
      tls: options.tls,
    };
    for (const u of options.listenUrls) peerUrlToAddress(u);
    const registry = options.registry ?? new Registry();
    this.prober = new Prober(this.ctx, rttHistogram(registry), {
      targets: () => [...this.peers].map(([id, peer]): [NodeId, string] => [id, peer.currentUrl()]),
    });
  }

  /** Listens on every listen URL and dials every peer. Resolves once listening. */
  async start(): Promise<void> {
    if (this.started) throw new Error("transport already started");
    this.started = true;
    for (const url of this.options.listenUrls) {
      const address = peerUrlToAddress(url);
      const server = address.secure === true ? this.tlsListener(url) : net.createServer((socket) => this.accept(socket));
      this.servers.push(server);
      await new Promise<void>((resolve, reject) => {
        server.once("error", reject);
        server.listen(address.port, address.host, () => {
          server.off("error", reject);
          resolve();
        });
      });
      server.on("error", (err) => this.ctx.logger.error({ error: err.message }, "peer listener error"));
      this.ctx.logger.info({ "listen-peer-url": url }, "serving peer traffic");
    }
    for (const [id, urls] of this.options.peers ?? []) this.addPeer(id, urls);
    this.prober.start();
    this.livenessTimer = setInterval(() => this.resetSilentPeers(), Math.max(1, Math.floor(this.ctx.limits.streamReadTimeoutMs / 4)));
    this.livenessTimer.unref();
  }

  /**
   * etcd's peer status: a peer is active while its streams work, and inactive once a read from it
   * times out (ConnReadTimeout). Our stream to a peer we have not heard from for the read timeout
   * (its own stream to us silent or gone: dead, hung, or cut off) is reset, so it counts inactive
   * (ActiveSince, etcd_network_active_peers) until both directions work again.
   */
  private resetSilentPeers(): void {
    const nowMs = performance.now();
    const timeoutMs = this.ctx.limits.streamReadTimeoutMs;
    for (const [id, peer] of this.peers) {
      const since = peer.activeSince();
      if (since === undefined || nowMs - since < timeoutMs) continue;
      const heard = this.lastHeardMs.get(id);
      if (heard !== undefined && nowMs - heard < timeoutMs) continue;
      peer.reset(heard === undefined ? `no stream from the peer for ${timeoutMs} ms` : `nothing heard from the peer for ${Math.round(nowMs - heard)} ms`);
    }
  }

  /** The bound addresses, in listen URL order (resolves port 0). */
  listenAddresses(): TcpAddress[] {
    return this.servers.map((s) => {
      const a = s.address() as net.AddressInfo;
      return { host: a.address, port: a.port };
    });
  }

  /** Queues messages for their peers; they are written once the current callback is done. */
  send(msgs: readonly Message[]): void {
    if (this.stopped) return;
    for (const m of msgs) {
      if (m.to === this.ctx.localId) throw new Error(`transport asked to send ${MessageType[m.type]} to the local member`);
      const peer = this.peers.get(m.to);
      if (peer === undefined) {
        this.ctx.logger.debug({ "remote-peer-id": formatId(m.to), "message-type": MessageType[m.type] }, "ignored message send request; unknown remote peer target");
        continue;
      }
      if (m.type === MessageType.MsgSnap) {
        this.startSnapshot(peer, m, memorySnapshotBody(m.snapshot?.data ?? new Uint8Array(0)));
        continue;
      }
      const dropped = peer.enqueue(m);
      if (dropped !== undefined) this.onDrop(peer, m, dropped);
    }
    this.scheduleFlush();
  }

  /**
   * Sends a MsgSnap whose data is `body` (a member's database image, read as it is sent) rather
   * than m.snapshot.data. The body is released when the transfer ends, or at once if it cannot start.
   */
  sendSnapshot(m: Message, body: SnapshotBody): void {
    const peer = this.stopped ? undefined : this.peers.get(m.to);
    if (peer === undefined) {
      void body.release();
      if (!this.stopped) setImmediate(() => this.reportSnapshot(m.to, true));
      return;
    }
    this.startSnapshot(peer, m, body);
  }

  /**
   * Asks `to` what its backend holds (issue 19), before a snapshot is made for it: undefined when
   * it answers nothing (an unknown or old peer, a timeout, an error; logged), and the full image
   * is sent.
   */
  async snapshotBase(to: NodeId): Promise<SnapshotBase | undefined> {
    const peer = this.stopped ? undefined : this.peers.get(to);
    if (peer === undefined) return undefined;
    try {
      return await requestSnapshotBase(this.ctx, to, peer.currentUrl());
    } catch (e) {
      this.ctx.logger.info({ "remote-peer-id": formatId(to), error: (e as Error).message }, "peer told no snapshot base; sending a full image");
      return undefined;
    }
  }

  addPeer(id: NodeId, urls: readonly string[]): void {
    if (id === this.ctx.localId) throw new Error("cannot add the local member as a peer");
    if (this.peers.has(id)) return;
    if (this.stopped) return;
    const stream = new PeerStream(id, urls, this.ctx, {
      onActiveChange: (peerId, active) => this.onActiveChange(peerId, active),
      onRemoved: () => {
        if (!this.stopped) this.options.onRemoved?.();
      },
    });
    this.peers.set(id, stream);
    this.ctx.logger.info({ "remote-peer-id": formatId(id), "remote-peer-urls": urls }, "added remote peer");
  }

  /** Forgets a member: closes its streams both ways and aborts a snapshot to it. */
  removePeer(id: NodeId): void {
    const peer = this.peers.get(id);
    if (peer === undefined) return;
    peer.stop();
    this.peers.delete(id);
    this.inboundStreams.get(id)?.destroy();
    this.inboundStreams.delete(id);
    this.lastHeardMs.delete(id);
    this.snapshotSends.get(id)?.abort();
    this.ctx.logger.info({ "remote-peer-id": formatId(id) }, "removed remote peer");
  }

  updatePeer(id: NodeId, urls: readonly string[]): void {
    const peer = this.peers.get(id);
    if (peer === undefined) throw new Error(`unknown peer ${formatId(id)}`);
    peer.updateUrls(urls);
    this.ctx.logger.info({ "remote-peer-id": formatId(id), "remote-peer-urls": urls }, "updated remote peer");
  }

  /** The peer URLs the stream to `id` dials (undefined for an unknown peer). */
  peerUrls(id: NodeId): readonly string[] | undefined {
    return this.peers.get(id)?.peerUrls();
  }

  /** True while the outgoing stream to `id` is established. */
  isActive(id: NodeId): boolean {
    return this.peers.get(id)?.isActive() ?? false;
  }

  /** Since when (performance.now() ms) the stream to `id` is active; undefined when it is not. */
  activeSince(id: NodeId): number | undefined {
    return this.peers.get(id)?.activeSince();
  }

  /** Counters of the outgoing stream to `id` (undefined for an unknown peer). */
  peerStats(id: NodeId): Readonly<PeerStreamStats> | undefined {
    const stats = this.peers.get(id)?.stats;
    return stats === undefined ? undefined : { ...stats };
  }

  peerIds(): NodeId[] {
    return [...this.peers.keys()];
  }

  /** Closes listeners and every connection; no callback runs after this resolves. */
  async stop(): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    clearInterval(this.livenessTimer);
    this.prober.stop();
    for (const peer of this.peers.values()) peer.stop();
    this.peers.clear();
    for (const s of this.snapshotSends.values()) s.abort();
    for (const socket of this.inboundSockets) socket.destroy();
    await Promise.all(this.servers.map((s) => new Promise<void>((resolve) => s.close(() => resolve()))));
  }

  /**
   * An https:// listener: a connection is served only once its handshake and the peer TLS checks
   * passed; a refused one is logged with the reason (etcd's "rejected connection") and closed.
   */
  private tlsListener(url: string): net.Server {
    const peerTls = this.ctx.tls;
    if (peerTls === undefined) throw new Error(`cannot listen on TLS for ${url.slice("https://".length)}: KeyFile and CertFile are not presented`);
    const server = tls.createServer(peerTls.server, (socket) => {
      socket.on("error", () => undefined);
      const remote = `${socket.remoteAddress}:${socket.remotePort}`;
      socket.pause();
      peerTls.checkInbound(socket).then(
        (refused) => {
          if (refused === undefined) {
            socket.resume();
            this.accept(socket);
            return;
          }
          this.ctx.logger.warn({ "remote-addr": remote, error: refused }, "rejected connection");
          socket.destroy();
        },
        (err: Error) => {
          this.ctx.logger.warn({ "remote-addr": remote, error: err.message }, "rejected connection");
          socket.destroy();
        },
      );
    });
    server.on("tlsClientError", (err: Error, socket: tls.TLSSocket) => {
      this.ctx.logger.warn({ "remote-addr": `${socket.remoteAddress}:${socket.remotePort}`, error: err.message }, "rejected connection");
    });
    return server;
  }

  private accept(socket: net.Socket): void {
    if (this.stopped) {
      socket.destroy();
      return;
    }
    this.inboundSockets.add(socket);
    socket.once("close", () => this.inboundSockets.delete(socket));
    serveInbound(this.ctx, socket, {
      isKnownPeer: (id) => this.peers.has(id),
      isRemovedPeer: (id) => this.options.isRemovedPeer?.(id) ?? false,
      membersInfo: () => this.options.membersInfo?.() ?? { clusterId: this.ctx.clusterId, members: [] },
      onStream: (from, s) => {
        const old = this.inboundStreams.get(from);
        if (old !== undefined && old !== s) old.destroy();
        this.inboundStreams.set(from, s);
        this.lastHeardMs.set(from, performance.now());
        this.peers.get(from)?.redialNow();
        s.on("data", () => this.lastHeardMs.set(from, performance.now()));
        s.once("close", () => {
          if (this.inboundStreams.get(from) === s) this.inboundStreams.delete(from);
        });
      },
      onMessages: (_from, msgs) => {
        for (const m of msgs) this.deliver(m);
      },
      onSnapshot: (_from, m) => this.deliver(m),
      snapshotBase: (from) => this.options.snapshotBase?.(from),
      openSnapshotSink: (from, m, totalBytes) => this.openSnapshotSink(from, m, totalBytes),
    });
  }

  private openSnapshotSink: SnapshotSinkFactory = async (from, m, totalBytes) => {
    if (this.options.snapshotSink !== undefined) return await this.options.snapshotSink(from, m, totalBytes);
    if (this.inboundSnapshotBytes + totalBytes > this.ctx.limits.maxInboundSnapshotBytes) {
      throw new Error(`too many snapshot bytes in flight to take ${totalBytes} more`);
    }
    this.inboundSnapshotBytes += totalBytes;
    return memorySnapshotSink(m, totalBytes, () => {
      this.inboundSnapshotBytes -= totalBytes;
      if (this.inboundSnapshotBytes < 0) throw new Error("inbound snapshot accounting went negative");
    });
  };

  private deliver(m: Message): void {
    if (this.stopped) return;
    try {
      this.options.onMessage(m);
    } catch (e) {
      this.ctx.logger.error({ error: (e as Error).message, "message-type": MessageType[m.type] }, "failed to process Raft message");
    }
  }

  private startSnapshot(peer: PeerStream, m: Message, body: SnapshotBody): void {
    const to = peer.id;
    const label = formatId(to);
    if (this.snapshotSends.has(to)) {
      void body.release();
      this.ctx.logger.warn({ "remote-peer-id": label }, "dropped MsgSnap: a snapshot to this peer is already in flight");
      setImmediate(() => this.reportSnapshot(to, true));
      return;
    }
    const startedMs = performance.now();
    const url = peer.currentUrl();
    const sizeBytes = body.sizeBytes;
    const kind = body.kind ?? { incremental: false };
    const kindFields = { incremental: kind.incremental, "base-revision": kind.baseRevision };
    this.ctx.logger.info({ "remote-peer-id": label, "snapshot-index": m.snapshot?.metadata.index, "size-bytes": sizeBytes, ...kindFields }, "sending database snapshot");
    const send = sendSnapshot(this.ctx, to, url, m, body);
    this.snapshotSends.set(to, send);
    send.done.then(
      ({ sentBytes }) => {
        this.snapshotSends.delete(to);
        this.ctx.metrics.snapshotSendSuccess.inc({ To: label });
        this.ctx.metrics.sentBytes.inc({ To: label }, sentBytes);
        const seconds = (performance.now() - startedMs) / 1000;
        this.ctx.metrics.snapshotSendSeconds.observe({ To: label }, seconds);
        this.ctx.metrics.snapshotSendBytes.inc({ To: label }, sentBytes);
        if (kind.incremental) this.ctx.metrics.snapshotSendIncremental.inc({ To: label });
        this.ctx.logger.info({ "remote-peer-id": label, "size-bytes": sizeBytes, "took-seconds": Number(seconds.toFixed(3)), ...kindFields }, "sent database snapshot");
        this.reportSnapshot(to, false);
      },
      (err: Error) => {
        this.snapshotSends.delete(to);
        this.ctx.metrics.snapshotSendFailures.inc({ To: label });
        this.ctx.logger.warn({ "remote-peer-id": label, error: err.message, ...kindFields }, "failed to send database snapshot");
        this.reportUnreachable(to);
        this.reportSnapshot(to, true);
      },
    );
  }

  private onDrop(peer: PeerStream, m: Message, reason: DropReason): void {
    this.pendingUnreachable.add(peer.id);
    this.ctx.metrics.sentFailures.inc({ To: formatId(peer.id) });
    const fields = { "message-type": MessageType[m.type], "remote-peer-id": formatId(peer.id), "remote-peer-active": peer.isActive() };
    if (reason === "too large") {
      this.ctx.logger.error({ ...fields, "size-bytes": m.entries.reduce((n, e) => n + e.data.byteLength, 0) }, "dropped Raft message larger than the maximum frame size");
      return;
    }
    const nowMs = performance.now();
    if (nowMs - (this.lastDropLogMs.get(peer.id) ?? -Infinity) < DROP_LOG_INTERVAL_MS) return;
    this.lastDropLogMs.set(peer.id, nowMs);
    if (reason === "queue full") this.ctx.logger.warn(fields, "dropped internal Raft message since sending buffer is full (overloaded network)");
    else this.ctx.logger.debug(fields, "dropped internal Raft message since the peer is not connected");
  }

  private onActiveChange(id: NodeId, active: boolean): void {
    if (this.stopped) return;
    if (!active) this.reportUnreachable(id);
    this.options.onPeerActive?.(id, active);
  }

  /**
   * Flushes once the current callback is done: every message raft produced in it (one Ready)
   * goes out in one write per peer. A microtask, not setImmediate: a Ready handled in the loop's
   * check phase would otherwise wait a whole loop iteration to leave, on the commit path.
   */
  private scheduleFlush(): void {
    if (this.flushScheduled) return;
    this.flushScheduled = true;
    queueMicrotask(() => {
      this.flushScheduled = false;
      if (this.stopped) return;
      for (const peer of this.peers.values()) if (peer.hasQueued()) peer.flush();
      const unreachable = [...this.pendingUnreachable];
      this.pendingUnreachable.clear();
      for (const id of unreachable) this.reportUnreachable(id);
    });
  }

  private reportUnreachable(id: NodeId): void {
    if (this.stopped) return;
    try {
      this.options.onUnreachable(id);
    } catch (e) {
      this.ctx.logger.error({ error: (e as Error).message }, "onUnreachable failed");
    }
  }

  private reportSnapshot(id: NodeId, failed: boolean): void {
    if (this.stopped) return;
    try {
      this.options.onSnapshotStatus(id, failed);
    } catch (e) {
      this.ctx.logger.error({ error: (e as Error).message }, "onSnapshotStatus failed");
    }
  }
}
