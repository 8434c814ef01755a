/**
 * When our HTTP/2 engine writes (src/grpc/h2/connection.ts, forget): the answer to a connection's
 * last open call leaves at once, in the turn it was made, rather than at the end of the turn; with
 * other calls still open an answer waits for the end of the turn, so the answers of one turn share
 * one write. The handler is held by the test and released from it, and a setImmediate queued right
 * after the release runs before any end-of-turn flush (immediates run in the order queued): what
 * the server wrote by then was written in the release's own turn.
 */
import { describe, expect, it } from "vitest";
import { GrpcServer } from "../../../src/grpc/server.js";
import { FRAME_HEADER_BYTES, Flag, FrameType } from "../../../src/grpc/h2/http2-frame.js";
import { type EchoRequest, type EchoResponse, HandlerStats, echoHandlers, frame, loadEchoCodecs } from "../harness.js";
import { engineOptions } from "./engines.js";
import { RawH2Client } from "./raw_client.js";
import { recordServerWrites, writesFixture } from "./server_writes.js";

const codecs = loadEchoCodecs();
const request = codecs.message<Record<string, unknown>>("etceteratest.EchoRequest");
const UNARY = "/etceteratest.Echo/Unary";

/** Stream ids whose END_STREAM HEADERS (the trailers) are in `write`, a buffer of whole frames. */
function endedStreams(write: Buffer): number[] {
  const out: number[] = [];
  for (let at = 0; at < write.length; ) {
    const length = write.readUIntBE(at, 3);
    const type = write[at + 3]!;
    const flags = write[at + 4]!;
    const streamId = write.readUInt32BE(at + 5) & 0x7fffffff;
    if (type === FrameType.HEADERS && (flags & Flag.END_STREAM) !== 0) out.push(streamId);
    at += FRAME_HEADER_BYTES + length;
  }
  return out;
}

describe("when an answer is written (own engine)", () => {
  const { servers, clients, restore } = writesFixture();

  /** A server whose Unary calls wait until the test releases them, and every write to its clients. */
  async function serve(): Promise<{ client: RawH2Client; writes: Buffer[]; held: Array<(r: EchoResponse) => void> }> {
    const held: Array<(r: EchoResponse) => void> = [];
    const server = new GrpcServer({ codecs, ...engineOptions("own") });
    server.addService("etceteratest.Echo", {
      ...echoHandlers(new HandlerStats()),
      Unary: (req: EchoRequest) => new Promise<EchoResponse>((resolve) => held.push((r) => resolve({ ...r, index: Number(req.payload.length) }))),
    });
    servers.push(server);
    const { port } = await server.listen(0);
    const { writes, restore: undo } = recordServerWrites(port);
    restore.push(undo);
    const client = await RawH2Client.connect(port);
    clients.push(client);
    return { client, writes, held };
  }

  function call(client: RawH2Client, streamId: number): void {
    client.headers(streamId, client.grpcHeaders(UNARY));
    client.dataFrame(streamId, frame(request.encode({ payload: Buffer.from("x") })), { endStream: true });
  }

  async function heldCalls(held: unknown[], n: number): Promise<void> {
    for (let i = 0; i < 500 && held.length < n; i++) await new Promise((r) => setTimeout(r, 2));
    expect(held).toHaveLength(n);
  }

  /** Releases `release`, then reports the streams answered by the time an immediate queued after it runs. */
  function endedBeforeTurnEnds(writes: Buffer[], release: () => void): Promise<number[]> {
    const from = writes.length;
    release();
    return new Promise((resolve) => setImmediate(() => resolve(writes.slice(from).flatMap(endedStreams))));
  }

  const ANSWER: EchoResponse = { payload: Buffer.from("y") };

  it("the last open call's answer is written in the turn it is made", async () => {
    const { client, writes, held } = await serve();
    call(client, 1);
    await heldCalls(held, 1);
    expect(await endedBeforeTurnEnds(writes, () => held[0]!(ANSWER))).toEqual([1]);
    expect((await client.response(1)).messages).toHaveLength(1);
  });

  it("with another call open, an answer waits for the end of the turn; answers of one turn share a write", async () => {
    const { client, writes, held } = await serve();
    call(client, 1);
    call(client, 3);
    call(client, 5);
    await heldCalls(held, 3);
    // Stream 3 answered while 1 and 5 stay open: not written within the turn, but by its end.
    expect(await endedBeforeTurnEnds(writes, () => held[1]!(ANSWER))).toEqual([]);
    expect((await client.response(3)).messages).toHaveLength(1);
    // Both others answered in one turn: the second is the last open call, and its write takes both.
    const from = writes.length;
    expect(await endedBeforeTurnEnds(writes, () => (held[0]!(ANSWER), held[2]!(ANSWER)))).toEqual([1, 5]);
    expect(writes.slice(from).filter((w) => endedStreams(w).length > 0)).toHaveLength(1);
    expect((await client.response(1)).messages).toHaveLength(1);
    expect((await client.response(5)).messages).toHaveLength(1);
  });
});
