/**
 * One accepted peer connection (etcd's rafthttp streamReader/snapshotHandler, server side).
 *
 * The first frame must be a Hello, within the handshake timeout and within a small size: until
 * then the connection may be anyone (a port scanner, a peer of another cluster, garbage), so it
 * gets no memory or trust. A Hello from another cluster, for another member or from an unknown
 * member is refused with a reason and logged. Any framing or decoding error closes the
 * connection; it never throws out of the socket handlers.
 */
import type * as net from "node:net";
import { crc32 } from "node:zlib";
import type { Message, NodeId } from "../../raft/types.js";
import { formatId } from "../member.js";
import type { TransportContext } from "./context.js";
import { type Frame, FRAME_HEADER_BYTES, FrameDecoder, FrameKind } from "./frame.js";
import {
  ConnectionKind,
  decodeHello,
  decodeMessages,
  decodeSnapBegin,
  decodeSnapChunk,
  decodeSnapEnd,
  encodeHelloOk,
  encodeHelloReject,
  encodeMembersInfo,
  type MembersInfo,
  encodeSnapAck,
  encodeSnapBase,
  type Hello,
  PROTOCOL_VERSION,
  RejectReason,
} from "./protocol.js";
import type { SnapshotSink, SnapshotSinkFactory } from "./snapshot_sink.js";
import type { SnapshotBase } from "../snapshot_delta_format.js";

export interface InboundHooks {
  isKnownPeer(id: NodeId): boolean;
  /** The cluster removed `id` (its connections are refused with MemberRemoved so it stops). */
  isRemovedPeer(id: NodeId): boolean;
  /** The answer to a "members" connection (etcd's GET /members). */
  membersInfo(): MembersInfo;
  /** A stream from `from` is established (the transport closes an older one from the same peer). */
  onStream(from: NodeId, socket: net.Socket): void;
  onMessages(from: NodeId, msgs: Message[]): void;
  /** Opens where an incoming snapshot's data goes; throwing refuses the snapshot with that reason. */
  openSnapshotSink: SnapshotSinkFactory;
  /** A snapshot arrived complete and durable; the receiver acknowledges after this returns. */
  onSnapshot(from: NodeId, m: Message): void;
  /** This member's backend as the base of an incremental snapshot from `from`; undefined offers none (full images only). */
  snapshotBase?(from: NodeId): SnapshotBase | undefined;
}

interface SnapshotReception {
  message: Message;
  sink: SnapshotSink;
  totalBytes: number;
  received: number;
  crc: number;
  startedMs: number;
}

/** Snapshot chunks received ahead of the one being written before the socket is paused. */
const SNAPSHOT_FRAMES_AHEAD = 3;

export function serveInbound(ctx: TransportContext, socket: net.Socket, hooks: InboundHooks): void {
  new InboundConnection(ctx, socket, hooks);
}

class InboundConnection {
  private readonly decoder: FrameDecoder;
  private hello: Hello | undefined;
  private peerLabel = "unknown";
  private snapshot: SnapshotReception | undefined;
  private snapshotDone = false;
  /** Snapshot frames are handled one after the other, each after the previous one's write. */
  private snapshotWork: Promise<void> = Promise.resolve();
  private snapshotFramesQueued = 0;
  private readonly handshakeTimer: NodeJS.Timeout;

  constructor(
    private readonly ctx: TransportContext,
    private readonly socket: net.Socket,
    private readonly hooks: InboundHooks,
  ) {
    this.decoder = new FrameDecoder(ctx.limits.maxHelloBytes);
    socket.setNoDelay(true);
    this.handshakeTimer = setTimeout(() => this.close("no handshake within the timeout"), ctx.limits.handshakeTimeoutMs);
    socket.on("data", (chunk: Buffer) => this.onData(chunk));
    socket.on("error", () => undefined); // 'close' follows; errors are reported where they matter
    socket.on("close", () => {
      clearTimeout(this.handshakeTimer);
      this.dropReception(); // the sender went away mid-transfer
      if (this.hello?.kind === ConnectionKind.Stream) {
        this.ctx.logger.info({ "local-member-id": formatId(this.ctx.localId), "remote-peer-id": this.peerLabel }, "lost TCP streaming connection with remote peer");
      }
    });
  }

  private onData(chunk: Buffer): void {
    if (this.socket.destroyed) return;
    try {
      for (const frame of this.decoder.push(chunk)) {
        if (this.socket.destroyed) return;
        this.onFrame(frame);
      }
    } catch (e) {
      if (this.hello !== undefined) this.ctx.metrics.receivedFailures.inc({ From: this.peerLabel });
      this.close(`protocol error: ${(e as Error).message}`);
    }
  }

  private onFrame(frame: Frame): void {
    if (this.hello === undefined) {
      if (frame.kind !== FrameKind.Hello) throw new Error(`expected Hello, got ${FrameKind[frame.kind] ?? frame.kind}`);
      this.onHello(decodeHello(frame.payload));
      return;
    }
    this.ctx.metrics.receivedBytes.inc({ From: this.peerLabel }, FRAME_HEADER_BYTES + 1 + frame.payload.byteLength);
    if (this.hello.kind === ConnectionKind.Stream) {
      if (frame.kind !== FrameKind.Messages) throw new Error(`unexpected ${FrameKind[frame.kind]} frame on a stream`);
      this.onMessages(decodeMessages(frame.payload));
    } else if (this.hello.kind === ConnectionKind.SnapshotBase) {
      if (frame.kind !== FrameKind.SnapBaseRequest) throw new Error(`unexpected ${FrameKind[frame.kind]} frame on a snapshot base connection`);
      let base: SnapshotBase | undefined;
      try {
        base = this.hooks.snapshotBase?.(this.hello.from);
      } catch (e) {
        this.ctx.logger.warn({ "remote-peer-id": this.peerLabel, error: (e as Error).message }, "could not tell the snapshot base; the leader sends a full image");
      }
      this.socket.end(encodeSnapBase(base ?? null));
      this.socket.destroySoon();
    } else {
      this.queueSnapshotFrame(frame);
    }
  }

  /**
   * Snapshot frames wait for the sink's write of the one before (written in order); the socket is
   * paused once SNAPSHOT_FRAMES_AHEAD are queued, so the network and the disk overlap while TCP
   * flow control holds the sender back and memory stays a few chunks.
   */
  private queueSnapshotFrame(frame: Frame): void {
    if (++this.snapshotFramesQueued >= SNAPSHOT_FRAMES_AHEAD) this.socket.pause();
    this.snapshotWork = this.snapshotWork.then(async () => {
      try {
        if (!this.socket.destroyed) await this.onSnapshotFrame(frame);
      } catch (e) {
        this.ctx.metrics.receivedFailures.inc({ From: this.peerLabel });
        this.close(`snapshot error: ${(e as Error).message}`);
      } finally {
        if (--this.snapshotFramesQueued === 0 && !this.socket.destroyed) this.socket.resume();
      }
    });
  }

  private onHello(h: Hello): void {
    const fields = {
      "local-member-id": formatId(this.ctx.localId),
      "local-member-cluster-id": formatId(this.ctx.clusterId),
      "remote-peer-id": formatId(h.from),
      "remote-peer-cluster-id": formatId(h.clusterId),
      "remote-addr": `${this.socket.remoteAddress}:${this.socket.remotePort}`,
    };
    let reject: [RejectReason, string] | undefined;
    if (h.version === PROTOCOL_VERSION && h.kind === ConnectionKind.Members) {
      // Anyone may ask (a joining member knows no ids yet), as anyone may GET /members from etcd.
      clearTimeout(this.handshakeTimer);
      this.socket.end(encodeMembersInfo(this.hooks.membersInfo()));
      this.socket.destroySoon();
      return;
    }
    if (h.version !== PROTOCOL_VERSION) {
      reject = [RejectReason.IncompatibleVersion, `incompatible peer protocol version ${h.version} (local ${PROTOCOL_VERSION})`];
    } else if (h.clusterId === this.ctx.clusterId && this.hooks.isRemovedPeer(h.from)) {
      reject = [RejectReason.MemberRemoved, "rejected stream from remote peer because it was removed"];
    } else if (h.clusterId !== this.ctx.clusterId) {
      reject = [RejectReason.ClusterIdMismatch, "request cluster ID mismatch"];
    } else if (h.to !== this.ctx.localId) {
      reject = [RejectReason.MemberIdMismatch, "ignored streaming request; ID mismatch"];
    } else if (!this.hooks.isKnownPeer(h.from)) {
      reject = [RejectReason.UnknownPeer, "failed to find remote peer in cluster"];
    }
    if (reject !== undefined) {
      this.ctx.logger.warn({ ...fields, "remote-cluster-token": h.clusterToken, "local-cluster-token": this.ctx.clusterToken }, reject[1]);
      this.socket.end(encodeHelloReject({ reason: reject[0], message: reject[1] }));
      this.socket.destroySoon();
      return;
    }
    clearTimeout(this.handshakeTimer);
    this.hello = h;
    this.peerLabel = formatId(h.from);
    this.decoder.maxFrameBytes = this.ctx.limits.maxFrameBytes;
    this.socket.write(encodeHelloOk(this.ctx.localId));
    if (h.kind === ConnectionKind.Probe) {
      this.socket.end();
      return;
    }
    if (h.kind === ConnectionKind.Stream) {
      this.socket.setKeepAlive(true, 5_000);
      this.ctx.logger.info({ "local-member-id": formatId(this.ctx.localId), "remote-peer-id": this.peerLabel }, "established TCP streaming connection with remote peer");
      this.hooks.onStream(h.from, this.socket);
    } else {
      this.socket.setTimeout(this.ctx.limits.snapshotIdleTimeoutMs, () => this.close("snapshot transfer stalled"));
    }
  }

  private onMessages(msgs: Message[]): void {
    const from = this.hello!.from;
    const accepted: Message[] = [];
    for (const m of msgs) {
      // A peer only speaks for itself, and only to us.
      if (m.from !== from || m.to !== this.ctx.localId) {
        this.ctx.logger.warn({ "remote-peer-id": this.peerLabel, from: formatId(m.from), to: formatId(m.to) }, "dropped Raft message with mismatched from/to");
        continue;
      }
      accepted.push(m);
    }
    if (accepted.length > 0) this.hooks.onMessages(from, accepted);
  }

  private async onSnapshotFrame(frame: Frame): Promise<void> {
    if (this.snapshotDone) throw new Error("data after the snapshot end");
    switch (frame.kind) {
      case FrameKind.SnapBegin: {
        if (this.snapshot !== undefined) throw new Error("second snapshot header");
        const { message, totalBytes } = decodeSnapBegin(frame.payload);
        if (message.from !== this.hello!.from || message.to !== this.ctx.localId) throw new Error("snapshot message with mismatched from/to");
        if (totalBytes > this.ctx.limits.maxSnapshotBytes) {
          await this.refuseSnapshot(`snapshot of ${totalBytes} bytes exceeds the maximum of ${this.ctx.limits.maxSnapshotBytes}`);
          return;
        }
        let sink: SnapshotSink;
        try {
          sink = await this.hooks.openSnapshotSink(this.hello!.from, message, totalBytes);
        } catch (e) {
          await this.refuseSnapshot((e as Error).message);
          return;
        }
        this.snapshot = { message, sink, totalBytes, received: 0, crc: 0, startedMs: performance.now() };
        if (this.socket.destroyed) this.dropReception(); // closed while the sink was opening
        return;
      }
      case FrameKind.SnapChunk: {
        const s = this.snapshot;
        if (s === undefined) throw new Error("snapshot chunk before the header");
        const { offset, data } = decodeSnapChunk(frame.payload);
        if (offset !== s.received) throw new Error(`snapshot chunk at ${offset}, expected ${s.received}`);
        if (s.received + data.byteLength > s.totalBytes) throw new Error("snapshot chunks exceed the announced size");
        s.crc = crc32(data, s.crc);
        s.received += data.byteLength;
        await s.sink.write(data);
        return;
      }
      case FrameKind.SnapEnd: {
        const s = this.snapshot;
        if (s === undefined) throw new Error("snapshot end before the header");
        const crc = decodeSnapEnd(frame.payload);
        if (s.received !== s.totalBytes) throw new Error(`snapshot ended at ${s.received} of ${s.totalBytes} bytes`);
        if (crc !== s.crc) {
          await this.refuseSnapshot(`snapshot checksum mismatch (${s.crc} != ${crc})`);
          return;
        }
        await this.deliverSnapshot(s);
        return;
      }
      default:
        throw new Error(`unexpected ${FrameKind[frame.kind]} frame on a snapshot connection`);
    }
  }

  /** Ends the reception in progress: what was received is dropped (a partial file is removed). */
  private dropReception(): void {
    const s = this.snapshot;
    this.snapshot = undefined;
    if (s === undefined) return;
    s.sink.abort().catch((e: Error) => this.ctx.logger.warn({ "remote-peer-id": this.peerLabel, error: e.message }, "failed to remove a partly received snapshot"));
  }

  private async deliverSnapshot(s: SnapshotReception): Promise<void> {
    this.snapshotDone = true;
    this.snapshot = undefined;
    let m: Message;
    try {
      this.socket.setTimeout(0); // the fsync of the whole file takes what the disk takes; the sender waits for it
      m = await s.sink.commit();
      if (this.socket.destroyed) throw new Error("connection closed before the snapshot was acknowledged");
      this.hooks.onSnapshot(this.hello!.from, m);
    } catch (e) {
      this.snapshot = s; // refuseSnapshot aborts the sink (removes the file)
      await this.refuseSnapshot(`receiver failed: ${(e as Error).message}`);
      return;
    }
    const seconds = (performance.now() - s.startedMs) / 1000;
    const kind = s.sink.kind?.() ?? { incremental: false };
    this.ctx.metrics.snapshotReceiveSuccess.inc({ From: this.peerLabel });
    this.ctx.metrics.snapshotReceiveSeconds.observe({ From: this.peerLabel }, seconds);
    this.ctx.metrics.snapshotReceiveBytes.inc({ From: this.peerLabel }, s.totalBytes);
    if (kind.incremental) this.ctx.metrics.snapshotReceiveIncremental.inc({ From: this.peerLabel });
    this.ctx.logger.info(
      {
        "remote-peer-id": this.peerLabel,
        "snapshot-index": m.snapshot!.metadata.index,
        "snapshot-size-bytes": s.totalBytes,
        "took-seconds": Number(seconds.toFixed(3)),
        incremental: kind.incremental,
        "base-revision": kind.baseRevision,
      },
      "received and delivered incoming snapshot",
    );
    this.socket.end(encodeSnapAck(true, ""));
  }

  private async refuseSnapshot(reason: string): Promise<void> {
    this.snapshotDone = true;
    const s = this.snapshot;
    this.snapshot = undefined;
    if (s !== undefined) await s.sink.abort().catch(() => undefined);
    this.ctx.metrics.snapshotReceiveFailures.inc({ From: this.peerLabel });
    this.ctx.logger.warn({ "remote-peer-id": this.peerLabel, error: reason }, "failed to receive snapshot");
    if (!this.socket.destroyed) this.socket.end(encodeSnapAck(false, reason));
  }

  private close(reason: string): void {
    if (this.snapshot !== undefined) this.ctx.metrics.snapshotReceiveFailures.inc({ From: this.peerLabel });
    this.dropReception();
    this.ctx.logger.warn({ "remote-peer-id": this.peerLabel, "remote-addr": `${this.socket.remoteAddress}:${this.socket.remotePort}`, reason }, "closed peer connection");
    this.socket.destroy();
  }
}
