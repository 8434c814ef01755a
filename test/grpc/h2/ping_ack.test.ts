/**
 * Our HTTP/2 engine holds a PING ACK for the next write of other frames (src/grpc/h2/connection.ts,
 * onPingFrame): grpc-go's clients ping after every response they read, so with one request in
 * flight an ACK written at once cost a socket write and a wake-up of the client per request. The
 * server's writes are counted on its own socket: the ACK must leave in the same write as the
 * response of the call that follows the PING, also when the PING is read before that call's
 * HEADERS (no call open yet), and must still come alone when nothing else is written.
 */
import { describe, expect, it } from "vitest";
import { GrpcServer } from "../../../src/grpc/server.js";
import { FRAME_HEADER_BYTES, Flag, FrameType } from "../../../src/grpc/h2/http2-frame.js";
import { HandlerStats, echoHandlers, frame, loadEchoCodecs } from "../harness.js";
import { engineOptions } from "./engines.js";
import { RawH2Client } from "./raw_client.js";
import { recordServerWrites, writesFixture } from "./server_writes.js";

const codecs = loadEchoCodecs();
const request = codecs.message<Record<string, unknown>>("etceteratest.EchoRequest");
const UNARY = "/etceteratest.Echo/Unary";

interface WrittenFrame {
  type: number;
  flags: number;
  streamId: number;
  payload: Buffer;
}

/** The frames of one server write (our engine writes whole frames only). */
function framesOf(write: Buffer): WrittenFrame[] {
  const out: WrittenFrame[] = [];
  for (let at = 0; at < write.length; ) {
    const length = write.readUIntBE(at, 3);
    const end = at + FRAME_HEADER_BYTES + length;
    expect(end).toBeLessThanOrEqual(write.length);
    out.push({ type: write[at + 3]!, flags: write[at + 4]!, streamId: write.readUInt32BE(at + 5) & 0x7fffffff, payload: write.subarray(at + FRAME_HEADER_BYTES, end) });
    at = end;
  }
  return out;
}

const isAckOf = (data: Buffer) => (f: WrittenFrame) => f.type === FrameType.PING && (f.flags & Flag.ACK) !== 0 && f.payload.equals(data);

describe("PING ACK held for the next write (own engine)", () => {
  const { servers, clients, restore } = writesFixture();

  /** A server on our engine, and every buffer it writes to its client sockets. */
  async function serve(pingAckHoldMs?: number): Promise<{ port: number; writes: Buffer[] }> {
    const server = new GrpcServer({ codecs, ...engineOptions("own"), pingAckHoldMs });
    server.addService("etceteratest.Echo", echoHandlers(new HandlerStats()));
    servers.push(server);
    const { port } = await server.listen(0);
    const { writes, restore: undo } = recordServerWrites(port);
    restore.push(undo);
    return { port, writes };
  }

  it("a PING read before the HEADERS of the next call (no call open) leaves with that call's response", async () => {
    // A hold far longer than the handler's delay: with the default 5 ms, a busy machine (a GC or a
    // first compile between the PING and the handler's timer) lets the hold expire first and the
    // ACK leave alone, correctly but not what this test is about.
    const { port, writes } = await serve(2_000);
    const client = await RawH2Client.connect(port);
    clients.push(client);
    const ping = Buffer.from("bdp-ping");
    // As grpc-go sends them after reading a response: PING, then the next request, in one segment.
    // The handler answers after a timer (as a member answers after raft), so the ACK and the
    // response cannot meet in one write by accident of the same turn.
    client.together(() => {
      client.ping(ping);
      client.headers(1, client.grpcHeaders(UNARY));
      client.dataFrame(1, frame(request.encode({ payload: Buffer.from("x"), delay_ms: 1 })), { endStream: true });
    });
    await client.response(1);
    const withAck = writes.filter((w) => framesOf(w).some(isAckOf(ping)));
    expect(withAck).toHaveLength(1);
    const frames = framesOf(withAck[0]!);
    expect(frames.some((f) => f.type === FrameType.HEADERS && f.streamId === 1 && (f.flags & Flag.END_STREAM) !== 0)).toBe(true);
    // The ACK comes before the response's frames, as it was read before the request.
    expect(frames.findIndex(isAckOf(ping))).toBeLessThan(frames.findIndex((f) => f.streamId === 1));
  });

  it("a PING with nothing else to write is still answered, alone", async () => {
    const { port, writes } = await serve();
    const client = await RawH2Client.connect(port);
    clients.push(client);
    const ping = Buffer.from("keepaliv");
    client.ping(ping);
    const ack = await client.waitFor((f) => f.type === FrameType.PING && (f.flags & Flag.ACK) !== 0 && f.payload.equals(ping), "the PING ACK");
    expect(ack.streamId).toBe(0);
    const withAck = writes.filter((w) => framesOf(w).some(isAckOf(ping)));
    expect(withAck).toHaveLength(1);
    expect(framesOf(withAck[0]!).every((f) => f.type === FrameType.PING || f.type === FrameType.SETTINGS || f.type === FrameType.WINDOW_UPDATE)).toBe(true);
  });
});
