/**
 * Sending one MsgSnap (etcd's rafthttp snapshotSender): its own connection, so a large snapshot
 * never delays heartbeats on the stream. The data goes in chunks, written only as fast as the
 * socket drains; a CRC of the whole data closes the transfer, and the receiver acknowledges once
 * it has delivered the reassembled message. The promise resolves on that acknowledgement and
 * rejects on any failure (the caller reports MsgSnapStatus accordingly).
 */
import type * as net from "node:net";
import { crc32 } from "node:zlib";
import type { Message, NodeId } from "../../raft/types.js";
import type { TransportContext } from "./context.js";
import { dialPeer } from "./dial.js";
import { type FrameDecoder, FrameKind } from "./frame.js";
import { ConnectionKind, decodeSnapAck, encodeSnapBegin, encodeSnapChunk, encodeSnapEnd } from "./protocol.js";
import { peerUrlToAddress } from "./url.js";

export interface SnapshotSend {
  readonly done: Promise<{ sentBytes: number }>;
  /** Aborts the transfer (the promise rejects). */
  abort(): void;
}

export function sendSnapshot(ctx: TransportContext, to: NodeId, url: string, m: Message): SnapshotSend {
  let socket: net.Socket | undefined;
  let aborted = false;
  const done = (async () => {
    if (m.snapshot === undefined) throw new Error("MsgSnap without snapshot");
    const data = m.snapshot.data;
    if (data.byteLength > ctx.limits.maxSnapshotBytes) throw new Error(`snapshot of ${data.byteLength} bytes exceeds the maximum`);
    const est = await dialPeer(ctx, to, peerUrlToAddress(url), ConnectionKind.Snapshot);
    socket = est.socket;
    if (aborted) {
      socket.destroy();
      throw new Error("snapshot send aborted");
    }
    return await streamSnapshot(ctx, socket, est.decoder, m, data);
  })();
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
  data: Uint8Array,
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
  await write(encodeSnapBegin(m, data.byteLength));
  let crc = 0;
  for (let offset = 0; offset < data.byteLength; offset += ctx.limits.snapshotChunkBytes) {
    const chunk = data.subarray(offset, Math.min(offset + ctx.limits.snapshotChunkBytes, data.byteLength));
    crc = crc32(chunk, crc);
    await write(encodeSnapChunk(offset, chunk));
  }
  await write(encodeSnapEnd(crc));
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
