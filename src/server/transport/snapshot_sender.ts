/**
 * Sending one MsgSnap (etcd's rafthttp snapshotSender): its own connection, so a large snapshot
 * never delays heartbeats on the stream. The data is read from its body one chunk at a time and
 * the next chunk is read only once the socket has drained the last (memory: a read buffer and
 * the frame in the socket, whatever the snapshot's size); a CRC of the whole data closes the
 * transfer, and the receiver acknowledges once it has made the data durable and delivered the
 * message. The promise resolves on that acknowledgement and rejects on any failure (the caller
 * reports MsgSnapStatus accordingly). The body is released either way.
 */
import type * as net from "node:net";
import { crc32 } from "node:zlib";
import type { Message, NodeId } from "../../raft/types.js";
import type { TransportContext } from "./context.js";
import { dialPeer } from "./dial.js";
import { type FrameDecoder, FrameKind } from "./frame.js";
import { ConnectionKind, decodeSnapAck, encodeSnapBegin, encodeSnapChunk, encodeSnapEnd } from "./protocol.js";
import type { SnapshotBody } from "./snapshot_body.js";
import { peerUrlToAddress } from "./url.js";

/** The receiver's fsync of the whole snapshot is allowed at least this speed (10 MB/s). */
const ACK_WAIT_BYTES_PER_MS = 10_000;

export interface SnapshotSend {
  readonly done: Promise<{ sentBytes: number }>;
  /** Aborts the transfer (the promise rejects). */
  abort(): void;
}

export function sendSnapshot(ctx: TransportContext, to: NodeId, url: string, m: Message, body: SnapshotBody): SnapshotSend {
  let socket: net.Socket | undefined;
  let aborted = false;
  const send = async (): Promise<{ sentBytes: number }> => {
    if (m.snapshot === undefined) throw new Error("MsgSnap without snapshot");
    if (body.sizeBytes > ctx.limits.maxSnapshotBytes) throw new Error(`snapshot of ${body.sizeBytes} bytes exceeds the maximum of ${ctx.limits.maxSnapshotBytes}`);
    const est = await dialPeer(ctx, to, peerUrlToAddress(url), ConnectionKind.Snapshot);
    socket = est.socket;
    if (aborted) {
      socket.destroy();
      throw new Error("snapshot send aborted");
    }
    return await streamSnapshot(ctx, socket, est.decoder, m, body);
  };
  const done = send().finally(() => body.release());
  return {
    done,
    abort: () => {
      aborted = true;
      socket?.destroy(new Error("snapshot send aborted"));
    },
  };
}

async function streamSnapshot(
  ctx: TransportContext,
  socket: net.Socket,
  decoder: FrameDecoder,
  m: Message,
  body: SnapshotBody,
): Promise<{ sentBytes: number }> {
  const ack = new Promise<void>((resolve, reject) => {
    socket.setTimeout(ctx.limits.snapshotIdleTimeoutMs, () => socket.destroy(new Error("snapshot transfer stalled")));
    socket.on("data", (chunk: Buffer) => {
      try {
        for (const frame of decoder.push(chunk)) {
          if (frame.kind !== FrameKind.SnapAck) throw new Error(`unexpected ${FrameKind[frame.kind]} frame`);
          const a = decodeSnapAck(frame.payload);
          if (a.ok) resolve();
          else reject(new Error(`receiver refused the snapshot: ${a.message}`));
          socket.end();
        }
      } catch (e) {
        socket.destroy(e as Error);
      }
    });
    socket.on("error", reject);
    socket.on("close", () => reject(new Error("connection closed before the snapshot was acknowledged")));
    socket.resume();
  });
  // Rejections before the writes finish are observed below; avoid an unhandled rejection meanwhile.
  ack.catch(() => undefined);

  let sentBytes = 0;
  const write = async (frame: Buffer): Promise<void> => {
    if (socket.destroyed) throw new Error("connection closed during snapshot transfer");
    sentBytes += frame.byteLength;
    if (!socket.write(frame)) await waitDrain(socket);
  };
  const total = body.sizeBytes;
  await write(encodeSnapBegin(m, total));
  let crc = 0;
  // One read buffer, reused: each chunk is copied into its frame, so the next chunk is read while
  // the socket drains the last one (memory: the buffer and one frame, whatever the size).
  const buf = Buffer.allocUnsafe(Math.min(ctx.limits.snapshotChunkBytes, Math.max(total, 1)));
  const readAt = async (offset: number): Promise<Buffer> => {
    const want = Math.min(buf.byteLength, total - offset);
    const got = await body.read(want === buf.byteLength ? buf : buf.subarray(0, want), offset);
    if (got !== want) throw new Error(`snapshot data ended at ${offset + got} of ${total} bytes`);
    return buf.subarray(0, got);
  };
  let chunk = total > 0 ? await readAt(0) : undefined;
  for (let offset = 0; chunk !== undefined; ) {
    crc = crc32(chunk, crc);
    const frame = encodeSnapChunk(offset, chunk);
    offset += chunk.byteLength;
    const [next] = await Promise.all([offset < total ? readAt(offset) : undefined, write(frame)]);
    chunk = next;
  }
  await write(encodeSnapEnd(crc));
  // The receiver now fsyncs the whole file before it acknowledges: allow for a slow disk
  // (ACK_WAIT_BYTES_PER_MS) on top of the idle timeout, or a large snapshot never completes.
  // A delta's receiver also hashes its base first (body.ackWaitBytes).
  const ackWaitBytes = Math.max(total, body.ackWaitBytes ?? 0);
  socket.setTimeout(ctx.limits.snapshotIdleTimeoutMs + Math.ceil(ackWaitBytes / ACK_WAIT_BYTES_PER_MS), () => socket.destroy(new Error("snapshot not acknowledged in time")));
  await ack;
  return { sentBytes };
}

function waitDrain(socket: net.Socket): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const cleanup = (): void => {
      socket.off("drain", onDrain);
      socket.off("close", onClose);
    };
    const onDrain = (): void => {
      cleanup();
      resolve();
    };
    const onClose = (): void => {
      cleanup();
      reject(new Error("connection closed during snapshot transfer"));
    };
    socket.on("drain", onDrain);
    socket.on("close", onClose);
  });
}
