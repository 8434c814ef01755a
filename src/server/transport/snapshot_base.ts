/**
 * The leader's question before it sends a snapshot (issue 19): what does the follower's backend
 * hold? One short "snapshot base" connection: SnapBaseRequest, one SnapBase back. The answer lets
 * the leader send only what changed since (Snapshots.image); no answer (a peer that predates the
 * question refuses the connection kind, a timeout, an error, or a peer offering none) means the
 * full image, as before.
 */
import type { NodeId } from "../../raft/types.js";
import type { SnapshotBase } from "../snapshot_delta_format.js";
import type { TransportContext } from "./context.js";
import { dialPeer } from "./dial.js";
import { FrameKind } from "./frame.js";
import { ConnectionKind, decodeSnapBase, encodeSnapBaseRequest } from "./protocol.js";
import { peerUrlToAddress } from "./url.js";

/** How long the answer may take after the handshake (it is read from memory on the peer). */
const ANSWER_TIMEOUT_MS = 3_000;

export async function requestSnapshotBase(ctx: TransportContext, to: NodeId, url: string): Promise<SnapshotBase | undefined> {
  const { socket, decoder } = await dialPeer(ctx, to, peerUrlToAddress(url), ConnectionKind.SnapshotBase);
  return await new Promise<SnapshotBase | undefined>((resolve, reject) => {
    let settled = false;
    const done = (err: Error | undefined, base?: SnapshotBase): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err !== undefined) reject(err);
      else resolve(base);
    };
    const timer = setTimeout(() => done(new Error("no snapshot base answered in time")), ANSWER_TIMEOUT_MS);
    socket.on("data", (chunk: Buffer) => {
      try {
        for (const frame of decoder.push(chunk)) {
          if (frame.kind !== FrameKind.SnapBase) throw new Error(`unexpected ${FrameKind[frame.kind]} frame answering a snapshot base request`);
          done(undefined, decodeSnapBase(frame.payload) ?? undefined);
          return;
        }
      } catch (e) {
        done(e as Error);
      }
    });
    socket.on("error", (e) => done(e));
    socket.on("close", () => done(new Error("connection closed before the snapshot base was answered")));
    socket.resume();
    socket.write(encodeSnapBaseRequest());
  });
}
