/**
 * Dialing a peer: TCP connect, send Hello, wait for HelloOk, all within the handshake timeout.
 * Resolves with a paused socket and its frame decoder, ready for the caller's own 'data' handler.
 */
import * as net from "node:net";
import { isIP } from "node:net";
import * as tls from "node:tls";
import type { NodeId } from "../../raft/types.js";
import { formatId } from "../member.js";
import type { TransportContext } from "./context.js";
import { FrameDecoder, FrameKind } from "./frame.js";
import { type ConnectionKind, decodeHelloOk, decodeHelloReject, encodeHello, PROTOCOL_VERSION, RejectReason } from "./protocol.js";
import type { PeerTransportTls } from "./tls_context.js";
import type { TcpAddress } from "./url.js";

/** The listener refused us; `reason` tells why (cluster id mismatch, unknown member, ...). */
export class HandshakeRejectedError extends Error {
  constructor(
    readonly reason: RejectReason,
    message: string,
  ) {
    super(message);
    this.name = "HandshakeRejectedError";
  }
}

export interface Established {
  socket: net.Socket;
  decoder: FrameDecoder;
}

/** A TCP connection to `address`, or TLS (with the peer TLS client options) for an https:// peer. */
export function connectSocket(peerTls: PeerTransportTls | undefined, address: TcpAddress): net.Socket {
  if (address.secure !== true) return net.connect({ host: address.host, port: address.port });
  return tls.connect({ ...peerTls?.client, host: address.host, port: address.port, servername: isIP(address.host) === 0 ? address.host : undefined });
}

/** TLS: the first byte goes once the handshake verified the remote member's certificate. */
export function connectedEvent(socket: net.Socket): "connect" | "secureConnect" {
  return socket instanceof tls.TLSSocket ? "secureConnect" : "connect";
}

export function dialPeer(ctx: TransportContext, to: NodeId, address: TcpAddress, kind: ConnectionKind, signal?: AbortSignal): Promise<Established> {
  return new Promise<Established>((resolve, reject) => {
    if (signal?.aborted === true) {
      reject(new Error("dial aborted"));
      return;
    }
    const socket = connectSocket(ctx.tls, address);
    socket.setNoDelay(true);
    const decoder = new FrameDecoder(ctx.limits.maxHelloBytes);
    let settled = false;
    const fail = (err: Error): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      socket.destroy();
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`handshake with ${address.host}:${address.port} timed out`)), ctx.limits.handshakeTimeoutMs);
    const onAbort = (): void => fail(new Error("dial aborted"));
    signal?.addEventListener("abort", onAbort, { once: true });
    const hello = (): void => {
      if (socket instanceof tls.TLSSocket) {
        const refused = ctx.tls?.checkOutbound(socket);
        if (refused !== undefined) {
          fail(new Error(`remote member's certificate refused: ${refused}`));
          return;
        }
      }
      socket.write(encodeHello({ version: PROTOCOL_VERSION, kind, clusterId: ctx.clusterId, from: ctx.localId, to, clusterToken: ctx.clusterToken }));
    };
    socket.once(connectedEvent(socket), hello);
    socket.on("error", fail);
    socket.once("close", () => fail(new Error("connection closed during handshake")));
    const onData = (chunk: Buffer): void => {
      try {
        const frames = decoder.push(chunk);
        if (frames.length === 0) return;
        const frame = frames[0]!;
        if (frames.length > 1 || decoder.pendingBytes() > 0) throw new Error("unexpected data after the handshake answer");
        if (frame.kind === FrameKind.HelloReject) {
          const r = decodeHelloReject(frame.payload);
          fail(new HandshakeRejectedError(r.reason, r.message));
          return;
        }
        if (frame.kind !== FrameKind.HelloOk) throw new Error(`unexpected ${FrameKind[frame.kind]} frame in handshake`);
        const remoteId = decodeHelloOk(frame.payload);
        if (remoteId !== to) {
          throw new HandshakeRejectedError(RejectReason.MemberIdMismatch, `dialed member ${formatId(to)} but ${formatId(remoteId)} answered`);
        }
        settled = true;
        clearTimeout(timer);
        signal?.removeEventListener("abort", onAbort);
        socket.off("data", onData);
        socket.off("error", fail);
        socket.removeAllListeners("close");
        socket.pause();
        decoder.maxFrameBytes = ctx.limits.maxFrameBytes;
        resolve({ socket, decoder });
      } catch (e) {
        fail(e as Error);
      }
    };
    socket.on("data", onData);
  });
}
