/** What the pieces of the transport (outbound streams, snapshot sender, inbound) share. */
import type { Logger } from "pino";
import type { NodeId } from "../../raft/types.js";
import type { TransportMetrics } from "./metrics.js";
import type { PeerTransportTls } from "./tls_context.js";

/** Every bound of the transport. Defaults in DEFAULT_LIMITS. */
export interface TransportLimits {
  /** Hard maximum of one frame's body; larger frames are refused by the receiver. */
  maxFrameBytes: number;
  /** Hard maximum of a Hello frame (before the peer is known, accept only small frames). */
  maxHelloBytes: number;
  /** Outgoing queue per peer, in messages (etcd's streamBufSize is 4096). */
  maxQueueMessages: number;
  /** Outgoing queue per peer, in encoded bytes. */
  maxQueueBytes: number;
  /** Stop handing frames to a socket whose unsent backlog exceeds this; resume on 'drain'. */
  socketHighWaterBytes: number;
  /** Snapshot data is streamed in chunks of this size. */
  snapshotChunkBytes: number;
  /** Neither end takes a snapshot larger than this (above etcd's largest quota, 8 GiB). */
  maxSnapshotBytes: number;
  /**
   * Total bytes of snapshots reassembled in memory at once, when the transport has no sink of the
   * member's (a member streams them to disk; this bounds only the in-memory fallback).
   */
  maxInboundSnapshotBytes: number;
  /** An outgoing stream whose unsent bytes make no progress for this long is considered dead. */
  streamStallTimeoutMs: number;
  /**
   * etcd's ConnReadTimeout: a peer from which nothing (no message, no link heartbeat) came for
   * this long, over a stream of ours at least this old, is inactive: our stream to it is reset.
   * An idle stream sends a link heartbeat every third of it, so a live peer is always heard.
   */
  streamReadTimeoutMs: number;
  /** Time for connect + Hello/HelloOk. */
  handshakeTimeoutMs: number;
  /** A snapshot transfer fails when no byte moves for this long. */
  snapshotIdleTimeoutMs: number;
  /** Reconnect backoff: first delay, doubled per failure up to the maximum (with ±25% jitter). */
  backoffInitialMs: number;
  backoffMaxMs: number;
}

export const DEFAULT_LIMITS: Readonly<TransportLimits> = Object.freeze({
  maxFrameBytes: 16 * 1024 * 1024,
  maxHelloBytes: 64 * 1024,
  maxQueueMessages: 4096,
  maxQueueBytes: 64 * 1024 * 1024,
  socketHighWaterBytes: 4 * 1024 * 1024,
  snapshotChunkBytes: 1024 * 1024,
  // etcd's maximum --quota-backend-bytes is 8 GiB; an image may exceed its quota a little (free pages).
  maxSnapshotBytes: 16 * 1024 * 1024 * 1024,
  maxInboundSnapshotBytes: 256 * 1024 * 1024,
  streamStallTimeoutMs: 10_000,
  streamReadTimeoutMs: 5_000,
  handshakeTimeoutMs: 5_000,
  snapshotIdleTimeoutMs: 30_000,
  backoffInitialMs: 50,
  backoffMaxMs: 2_000,
});

export interface TransportContext {
  readonly localId: NodeId;
  readonly clusterId: NodeId;
  readonly clusterToken: string;
  readonly logger: Logger;
  readonly metrics: TransportMetrics;
  readonly limits: Readonly<TransportLimits>;
  /** Peer TLS for https:// URLs; without it an https:// peer is dialed with Node's default CAs and cannot be listened on. */
  readonly tls: PeerTransportTls | undefined;
}
