/**
 * Asking a peer for the cluster's membership (etcd's GetClusterFromRemotePeers: GET /members on
 * each peer URL until one answers). A member joining with --initial-cluster-state=existing has no
 * member or cluster id yet, so the Hello of a "members" connection carries none.
 */
import { connectedEvent, connectSocket } from "./dial.js";
import { DEFAULT_MAX_FRAME_BYTES, FrameDecoder, FrameKind } from "./frame.js";
import { ConnectionKind, decodeHelloReject, decodeMembersInfo, encodeHello, type MembersInfo, PROTOCOL_VERSION } from "./protocol.js";
import type { PeerTransportTls } from "./tls_context.js";
import { peerUrlToAddress } from "./url.js";

/** The membership as the member at `peerUrl` has applied it. */
export function fetchMembers(peerUrl: string, timeoutMs: number, tls?: PeerTransportTls): Promise<MembersInfo> {
  const address = peerUrlToAddress(peerUrl);
  return new Promise<MembersInfo>((resolve, reject) => {
    const socket = connectSocket(tls, address);
    const decoder = new FrameDecoder(DEFAULT_MAX_FRAME_BYTES);
    let settled = false;
    const settle = (err: Error | undefined, info?: MembersInfo): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      socket.destroy();
      if (err !== undefined) reject(err);
      else resolve(info!);
    };
    const timer = setTimeout(() => settle(new Error(`no answer from ${peerUrl} within ${timeoutMs} ms`)), timeoutMs);
    socket.once(connectedEvent(socket), () => {
      socket.write(encodeHello({ version: PROTOCOL_VERSION, kind: ConnectionKind.Members, clusterId: 0n, from: 0n, to: 0n, clusterToken: "" }));
    });
    socket.on("error", (err) => settle(err));
    socket.once("close", () => settle(new Error(`${peerUrl} closed the connection without answering`)));
    socket.on("data", (chunk: Buffer) => {
      try {
        const frame = decoder.push(chunk)[0];
        if (frame === undefined) return;
        if (frame.kind === FrameKind.HelloReject) throw new Error(`${peerUrl} refused: ${decodeHelloReject(frame.payload).message}`);
        if (frame.kind !== FrameKind.MembersInfo) throw new Error(`${peerUrl} answered ${FrameKind[frame.kind]}`);
        settle(undefined, decodeMembersInfo(frame.payload));
      } catch (e) {
        settle(e as Error);
      }
    });
  });
}
